// Helpers of the hostile-client tests: raw HTTP/2 connections that stay
// idle, waiting for a health status, heavy traces (the habitat-server
// binary as a child process, health checks and scrapes: testing/).
// Everything is on loopback; every wait is bounded.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "habitat/v1/trace.pb.h"

namespace habitat::hostile {

// The real ResNet-50 trace the agent recorded on an H100 (batch 32), its
// operations repeated until there are `operations`, and with
// `with_host_events` its host events once per repetition: heavy input made
// of real records.
habitat::v1::Trace RepeatedAgentTrace(int operations, bool with_host_events);

// Polls testing::CheckHealth (the whole server, a fresh connection each
// time) until it returns `want`, at most `timeout`; the last
// result as text for messages.
bool WaitForHealth(const std::string& address, int want, absl::Duration timeout, std::string* last);

// A TCP connection to 127.0.0.1:port that sends the HTTP/2 client preface
// and an empty SETTINGS frame, then stays idle: what a client that opened a
// channel and makes no call holds.
class IdleConnection {
 public:
  enum class State { kServed, kClosed, kSilent };
  // Without `preface` the connection sends nothing at all. A failed
  // connect counts as closed. `source`: the numeric IPv4 address to connect
  // from (another peer on loopback: "127.0.0.2"); empty: the kernel's choice.
  explicit IdleConnection(int port, bool preface = true, const std::string& source = "");
  ~IdleConnection();
  IdleConnection(const IdleConnection&) = delete;
  IdleConnection& operator=(const IdleConnection&) = delete;
  bool connected() const { return fd_ >= 0; }
  // What the server did first: sent bytes (its SETTINGS: gRPC serves the
  // connection), closed or reset it (shed), or nothing within `timeout`
  // (the connection waits in the kernel's queue: nobody accepts). Once
  // known, the same answer every time.
  State First(absl::Duration timeout);
  // Reads and drops what comes until the server closes the connection;
  // false if it is still open after `timeout`.
  bool WaitClosed(absl::Duration timeout);
  // The server's first SETTINGS frame (see ServerSettings).
  absl::StatusOr<std::map<int, uint32_t>> ReadSettings(absl::Duration timeout);
  // Writes `bytes` (raw HTTP/2 frames), waiting at most `timeout` for room;
  // false once the connection is closed or the time is up.
  bool Send(const std::string& bytes, absl::Duration timeout);
  // Reads and drops whatever the server has sent so far, without waiting.
  void Drain();

 private:
  int fd_ = -1;
  State first_ = State::kSilent;
};

// The HTTP/2 SETTINGS the server sends first on a new connection to
// 127.0.0.1:port (after the client preface): identifier -> value; an error
// when none came within `timeout`.
absl::StatusOr<std::map<int, uint32_t>> ServerSettings(int port, absl::Duration timeout);

}  // namespace habitat::hostile
