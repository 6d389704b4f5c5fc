// Helpers of the hostile-client tests: the habitat-server binary as a child
// process (with its own file descriptor limit, its peak RSS readable),
// raw HTTP/2 connections that stay idle, and health checks with a deadline.
// Everything is on loopback; every wait is bounded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "habitat/v1/trace.pb.h"

namespace habitat::hostile {

struct ServerSpec {
  // Flags after the defaults (loopback ports 0, memory store, no models,
  // no metrics, the source tree's data/); later ones win.
  std::vector<std::string> flags;
  // RLIMIT_NOFILE (soft and hard) of the child; 0 leaves it.
  int nofile = 0;
};

// habitat-server started on loopback; SIGKILLed on destruction if running.
class ServerProcess {
 public:
  explicit ServerProcess(const ServerSpec& spec);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Waits (bounded) for "serving on port"; false if the server exited or
  // took too long (Stderr() says why).
  bool WaitServing(absl::Duration timeout = absl::Seconds(60));
  int port() const { return port_; }
  int health_port() const { return health_port_; }
  std::string address() const;
  std::string health_address() const;
  pid_t pid() const { return pid_; }
  // Still running (not exited).
  bool Alive();
  // The peak resident set size (VmHWM) in KiB, or -1.
  long PeakRssKib() const;
  // Everything written to stderr so far.
  std::string Stderr() const;
  // Polls stderr until it contains `needle`, at most `timeout`.
  bool WaitForStderr(const std::string& needle, absl::Duration timeout) const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string stderr_path_;
  int port_ = 0;
  int health_port_ = 0;
};

// The real ResNet-50 trace the agent recorded on an H100 (batch 32), its
// operations repeated until there are `operations`, and with
// `with_host_events` its host events once per repetition: heavy input made
// of real records.
habitat::v1::Trace RepeatedAgentTrace(int operations, bool with_host_events);

// The /metrics port the server logged ("metrics on port N"); 0 if none.
int MetricsPort(const ServerProcess& server);

// GET `path` over HTTP/1.0 from 127.0.0.1:port: the whole response (status
// line, headers, body) as far as it came within `timeout`; "" when nothing
// came back.
std::string HttpGet(int port, const std::string& path, absl::Duration timeout);

// grpc.health.v1.Health/Check ("" service) on a fresh connection:
// 1 SERVING, 2 NOT_SERVING; an error status when the call failed.
absl::StatusOr<int> CheckHealth(const std::string& address, absl::Duration deadline);

// Polls CheckHealth until it returns `want`, at most `timeout`; the last
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
