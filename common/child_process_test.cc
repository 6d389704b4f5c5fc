#include "common/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"

namespace habitat {
namespace {

class ChildProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/habitat_child_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  static int ExitCode(pid_t pid) { return WaitChild(pid).value_or(-1); }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // sh -c SCRIPT
  static std::vector<std::string> Shell(const std::string& script) {
    return {"/bin/sh", "-c", script};
  }

  std::string dir_;
};

TEST_F(ChildProcessTest, RedirectsToFilesAndReportsTheExitCode) {
  ChildOptions options;
  options.stdout_path = dir_ + "/out";
  options.stderr_path = dir_ + "/err";
  auto pid = StartChild(Shell("echo to-out; echo to-err >&2; exit 3"), options);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(ExitCode(*pid), 3);
  EXPECT_EQ(Read(dir_ + "/out"), "to-out\n");
  EXPECT_EQ(Read(dir_ + "/err"), "to-err\n");
}

TEST_F(ChildProcessTest, OnePathTakesBothStreamsAndAppendKeepsWhatWasThere) {
  ChildOptions options;
  options.stdout_path = options.stderr_path = dir_ + "/log";
  options.append = true;
  for (int i = 0; i < 2; ++i) {
    auto pid = StartChild(Shell("echo a; echo b >&2"), options);
    ASSERT_TRUE(pid.ok());
    EXPECT_EQ(ExitCode(*pid), 0);
  }
  EXPECT_EQ(Read(dir_ + "/log"), "a\nb\na\nb\n");
}

TEST_F(ChildProcessTest, PipeLimitsAndWorkingDirectory) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ChildOptions options;
  options.stderr_fd = fds[1];
  options.cwd = dir_;
  options.limits = {{RLIMIT_NOFILE, 77}};
  auto pid = StartChild(Shell("pwd >&2; ulimit -n >&2"), options);
  ::close(fds[1]);
  ASSERT_TRUE(pid.ok());
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof(buffer))) > 0;) text.append(buffer, n);
  ::close(fds[0]);
  EXPECT_EQ(ExitCode(*pid), 0);
  EXPECT_EQ(text, dir_ + "\n77\n");
}

TEST_F(ChildProcessTest, SetupAndExecFailuresHaveTheirOwnExitCodes) {
  auto missing = StartChild({dir_ + "/no-such-program"});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(ExitCode(*missing), kChildExecFailed);
  ChildOptions options;
  options.stdout_path = dir_ + "/no-such-dir/out";
  auto unwritable = StartChild(Shell("true"), options);
  ASSERT_TRUE(unwritable.ok());
  EXPECT_EQ(ExitCode(*unwritable), kChildSetupFailed);
  EXPECT_FALSE(StartChild({}).ok());
}

TEST_F(ChildProcessTest, WaitChildReportsASignalAndAPidThatIsNoChildAsErrors) {
  auto killed = StartChild(Shell("kill -9 $$"));
  ASSERT_TRUE(killed.ok());
  const absl::StatusOr<int> code = WaitChild(*killed);
  ASSERT_FALSE(code.ok());
  EXPECT_NE(code.status().message().find("signal 9"), std::string::npos) << code.status();
  // Already reaped: waitpid fails with ECHILD.
  EXPECT_FALSE(WaitChild(*killed).ok());
}

TEST_F(ChildProcessTest, WaitChildKeepsWaitingWhenASignalInterruptsIt) {
  // A handler without SA_RESTART: the alarm makes waitpid fail with EINTR.
  struct sigaction alarm_action = {}, old_action = {};
  alarm_action.sa_handler = [](int) {};
  ASSERT_EQ(::sigaction(SIGALRM, &alarm_action, &old_action), 0);
  auto pid = StartChild(Shell("sleep 0.5; exit 4"));
  ASSERT_TRUE(pid.ok());
  const itimerval once = {{0, 0}, {0, 100'000}};
  ASSERT_EQ(::setitimer(ITIMER_REAL, &once, nullptr), 0);
  EXPECT_EQ(ExitCode(*pid), 4);
  ::sigaction(SIGALRM, &old_action, nullptr);
}

}  // namespace
}  // namespace habitat
