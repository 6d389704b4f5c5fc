// The habitat-server executable: starts on port 0, reports its port on
// stderr, answers, and on SIGTERM drains and exits 0.
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/prediction_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/server_process.h"

namespace habitat {
namespace {

using ::habitat::testing::ServerProcess;
using ::habitat::testing::ServerSpec;
using ::testing::HasSubstr;

TEST(ServerBinaryTest, ServesOnAnEphemeralPortAndDrainsOnSigterm) {
  // Without the loopback defaults: the shipped ones (the served models, the
  // health port) stand but for these flags.
  ServerProcess server(
      ServerSpec{{"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0", "--store=memory",
                  absl::StrCat("--data_dir=", HABITAT_DATA_DIR), "--shutdown_grace_seconds=5"},
                 /*nofile=*/0,
                 /*defaults=*/false});
  ASSERT_GT(server.pid(), 0);
  ASSERT_TRUE(server.WaitServing(absl::Seconds(30))) << server.Stderr();
  const std::string address = server.address();

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
  EXPECT_TRUE(server.WaitForStderr("stopped", absl::Seconds(5))) << server.Stderr();

  // Nothing listens any more.
  ClientOptions once;
  once.max_attempts = 1;
  auto after = PredictionClient::Connect(address, once);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)->ListDevices().status().code(), absl::StatusCode::kUnavailable);
}

TEST(ServerBinaryTest, BadDataDirectoryFailsAtStartWithExitCode1) {
  ServerProcess server(ServerSpec{
      {"--address=127.0.0.1:0", "--metrics_address=", "--data_dir=/nonexistent/habitat-data"},
      /*nofile=*/0,
      /*defaults=*/false});
  ASSERT_GT(server.pid(), 0);
  const int status = server.Wait(absl::Seconds(20));
  ASSERT_NE(status, -1);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  server.WaitForStderr("cannot start", absl::Seconds(2));
  EXPECT_THAT(server.Stderr(), HasSubstr("/nonexistent/habitat-data"));
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
