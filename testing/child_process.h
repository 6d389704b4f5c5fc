// A program the test starts (common/child_process.h) and watches: its
// output in files, bounded waits, SIGKILL when the test is done with it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/child_process.h"

namespace habitat::testing {

// A child process (fork + execv) with stdout and stderr in files (an empty
// path: the test's own). Killed with SIGKILL on destruction if still
// running. `options`: the rest of ChildOptions (limits, working directory);
// its output paths are the ones given here.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& args, const std::string& stdout_path,
               const std::string& stderr_path, ChildOptions options = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool Signal(int signal) const;
  // Started and not yet exited.
  bool Alive();
  // The wait status, or -1 if it did not exit within `timeout`.
  int Wait(absl::Duration timeout);
  // Polls the stderr file until it contains `needle`; its contents.
  std::string WaitForStderr(const std::string& needle, absl::Duration timeout) const;
  std::string Stdout() const;
  std::string Stderr() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string stdout_path_, stderr_path_;
};

}  // namespace habitat::testing
