// The habitat-server binary as a child process of the test: started with
// loopback defaults or exactly the flags given, its ports read from its
// log, its peak memory readable. Every wait is bounded.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "testing/child_process.h"
#include "testing/files.h"

namespace habitat::testing {

struct ServerSpec {
  // Flags after the defaults (loopback ports 0, memory store, no models,
  // no metrics, the source tree's data/); later ones win.
  std::vector<std::string> flags;
  // RLIMIT_NOFILE (soft and hard) of the child; 0 leaves it.
  int nofile = 0;
  // false: no defaults, only `flags`.
  bool defaults = true;
};

// habitat-server started (the build's, or $HABITAT_HOSTILE_SERVER: the
// tests against another build, e.g. an older one, to see a test fail
// there); SIGKILLed on destruction if running. Its stderr goes to a file.
class ServerProcess {
 public:
  explicit ServerProcess(const ServerSpec& spec);
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Waits (bounded) for "serving on port"; false if the server exited or
  // took too long (Stderr() says why).
  bool WaitServing(absl::Duration timeout = absl::Seconds(60));
  int port() const { return port_; }
  int health_port() const { return health_port_; }
  std::string address() const;
  std::string health_address() const;
  // The /metrics port the server logged ("metrics on port N"); 0 if none.
  int metrics_port() const;
  pid_t pid() const { return child_.pid(); }
  // Still running (not exited).
  bool Alive() { return child_.Alive(); }
  // The wait status, or -1 if it did not exit within `timeout`.
  int Wait(absl::Duration timeout) { return child_.Wait(timeout); }
  // The peak resident set size (VmHWM) in KiB, or -1.
  long PeakRssKib() const;
  // Everything written to stderr so far.
  std::string Stderr() const { return child_.Stderr(); }
  // Polls stderr until it contains `needle`, at most `timeout`.
  bool WaitForStderr(const std::string& needle, absl::Duration timeout) const;

 private:
  // Declared before the child: removed after it is killed.
  ScratchDir dir_;
  ChildProcess child_;
  int port_ = 0;
  int health_port_ = 0;
};

}  // namespace habitat::testing
