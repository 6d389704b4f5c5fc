// A habitat-server child process for the load test: started on a free
// loopback port (read back from its start-up line), its memory read from
// /proc, stopped with SIGTERM.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace habitat {
namespace load_test {

// Resident set size now (VmRSS) and its peak so far (VmHWM), in KiB.
struct MemorySample {
  int64_t rss_kib = 0;
  int64_t peak_rss_kib = 0;
};

// Reads /proc/<pid>/status; NOT_FOUND when the process is gone.
absl::StatusOr<MemorySample> ReadMemory(pid_t pid);

// User + system CPU time the process has used (/proc/<pid>/stat), in
// seconds: with the machine shared, CPU per call is the number that does not
// depend on what else runs.
absl::StatusOr<double> ReadCpuSeconds(pid_t pid);
// The same for this process (getrusage).
double OwnCpuSeconds();

class ServerProcess {
 public:
  // Runs `binary` with `--address=127.0.0.1:0 --metrics_address=` and
  // `extra_args`; returns once it reports its port, or an error with what
  // it printed.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& binary, const std::vector<std::string>& extra_args,
      absl::Duration timeout);
  // Kills the process if Stop() was not called.
  ~ServerProcess();

  pid_t pid() const { return pid_; }
  int port() const { return port_; }

  // SIGTERM, then waits; OK when it exited with status 0.
  absl::Status Stop(absl::Duration timeout);

 private:
  ServerProcess(pid_t pid, int stderr_fd) : pid_(pid), stderr_fd_(stderr_fd) {}
  // Copies the server's stderr to ours (prefixed), so the pipe never fills.
  void Forward();

  pid_t pid_;
  int stderr_fd_;
  int port_ = 0;
  bool exited_ = false;
  std::string early_output_;
  std::thread forwarder_;
};

}  // namespace load_test
}  // namespace habitat
