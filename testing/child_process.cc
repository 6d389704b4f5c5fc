#include "testing/child_process.h"

#include <signal.h>
#include <sys/wait.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "testing/files.h"

namespace habitat::testing {

ChildProcess::ChildProcess(const std::vector<std::string>& args, const std::string& stdout_path,
                           const std::string& stderr_path, ChildOptions options)
    : stdout_path_(stdout_path), stderr_path_(stderr_path) {
  options.stdout_path = stdout_path;
  options.stderr_path = stderr_path;
  absl::StatusOr<pid_t> pid = StartChild(args, options);
  EXPECT_TRUE(pid.ok()) << pid.status();
  pid_ = pid.value_or(-1);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool ChildProcess::Signal(int signal) const { return pid_ > 0 && ::kill(pid_, signal) == 0; }

bool ChildProcess::Alive() {
  if (pid_ <= 0 || reaped_) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

int ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (pid_ > 0 && !reaped_) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return status;
    }
    if (absl::Now() >= end) return -1;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return -1;
}

std::string ChildProcess::WaitForStderr(const std::string& needle, absl::Duration timeout) const {
  const absl::Time end = absl::Now() + timeout;
  std::string text = Stderr();
  while (!absl::StrContains(text, needle) && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(5));
    text = Stderr();
  }
  return text;
}

std::string ChildProcess::Stdout() const { return ReadWholeFile(stdout_path_); }
std::string ChildProcess::Stderr() const { return ReadWholeFile(stderr_path_); }

}  // namespace habitat::testing
