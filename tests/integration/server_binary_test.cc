// The habitat-server executable: starts on port 0, reports its port on
// stderr, answers, and on SIGTERM drains and exits 0.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/prediction_client.h"
#include "common/child_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;

// A child process with its stderr on a pipe.
class ServerProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& args) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    ChildOptions options;
    options.stderr_fd = fds[1];
    absl::StatusOr<pid_t> pid = StartChild(args, options);
    close(fds[1]);
    EXPECT_TRUE(pid.ok()) << pid.status();
    pid_ = pid.value_or(-1);
    stderr_fd_ = fds[0];
  }
  ~ServerProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stderr_fd_ >= 0) close(stderr_fd_);
  }

  // Reads stderr until `pattern` matches or `timeout` passes; returns what
  // was read so far.
  std::string ReadUntil(const std::regex& pattern, absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (!std::regex_search(output_, pattern) && absl::Now() < end) {
      pollfd p{stderr_fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buffer[4096];
      const ssize_t n = read(stderr_fd_, buffer, sizeof(buffer));
      if (n <= 0) break;
      output_.append(buffer, static_cast<size_t>(n));
    }
    return output_;
  }

  // Waits up to `timeout` for the process; its wait status, or -1.
  int Wait(absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (absl::Now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return status;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return -1;
  }

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stderr_fd_ = -1;
  bool exited_ = false;
  std::string output_;
};

TEST(ServerBinaryTest, ServesOnAnEphemeralPortAndDrainsOnSigterm) {
  ServerProcess server({HABITAT_SERVER_BINARY, "--address=127.0.0.1:0",
                        "--metrics_address=127.0.0.1:0", "--store=memory",
                        absl::StrCat("--data_dir=", HABITAT_DATA_DIR),
                        "--shutdown_grace_seconds=5"});
  ASSERT_GT(server.pid(), 0);
  const std::regex serving(R"(serving on port (\d+))");
  const std::string out = server.ReadUntil(serving, absl::Seconds(30));
  std::smatch match;
  ASSERT_TRUE(std::regex_search(out, match, serving)) << out;
  const std::string address = absl::StrCat("127.0.0.1:", match[1].str());

  auto client = PredictionClient::Connect(address);
  ASSERT_TRUE(client.ok());
  auto devices = (*client)->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_GT(devices->devices_size(), 0);

  // The client stays connected (idle) while the server drains: gRPC then
  // holds the shutdown until the grace period ends (5 s here), so allow
  // grace + 15 s.
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  const int status = server.Wait(absl::Seconds(20));
  ASSERT_NE(status, -1) << "habitat-server did not exit within 20 s of SIGTERM";
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_THAT(server.ReadUntil(std::regex("stopped"), absl::Seconds(5)), HasSubstr("stopped"));

  // Nothing listens any more.
  ClientOptions once;
  once.max_attempts = 1;
  auto after = PredictionClient::Connect(address, once);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)->ListDevices().status().code(), absl::StatusCode::kUnavailable);
}

TEST(ServerBinaryTest, BadDataDirectoryFailsAtStartWithExitCode1) {
  ServerProcess server({HABITAT_SERVER_BINARY, "--address=127.0.0.1:0",
                        "--metrics_address=", "--data_dir=/nonexistent/habitat-data"});
  ASSERT_GT(server.pid(), 0);
  const int status = server.Wait(absl::Seconds(20));
  ASSERT_NE(status, -1);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_THAT(server.ReadUntil(std::regex("cannot start"), absl::Seconds(2)),
              HasSubstr("/nonexistent/habitat-data"));
}

// Without a client deadline a call runs to the server's cap: at 60 s two
// heavy calls held both work threads long enough to time other tenants
// out.
TEST(ServerBinaryTest, TheDefaultRequestCapIsBelowAMinute) {
  FILE* help = popen(absl::StrCat(HABITAT_SERVER_BINARY, " --helpfull 2>/dev/null").c_str(), "r");
  ASSERT_NE(help, nullptr);
  std::string text;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), help)) > 0 && text.size() < (1 << 20);) {
    text.append(buffer, n);
  }
  pclose(help);
  std::smatch match;
  ASSERT_TRUE(std::regex_search(text, match,
                                std::regex(R"(--max_request_seconds [^;]*;\s*default: ([0-9.]+))")))
      << text.substr(0, 2000);
  EXPECT_LT(std::stod(match[1]), 60.0);
}

}  // namespace
}  // namespace habitat
