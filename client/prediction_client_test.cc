// PredictionClient against no server; calls against a real server are in
// tests/integration/server_integration_test.cc.
#include "client/prediction_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;

// A loopback port with nothing listening: bind one, read its number, close.
int UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(PredictionClientTest, RejectsBadOptions) {
  EXPECT_EQ(PredictionClient::Connect("").status().code(), absl::StatusCode::kInvalidArgument);
  ClientOptions options;
  options.max_attempts = 0;
  EXPECT_THAT(PredictionClient::Connect("127.0.0.1:1", options).status().message(),
              HasSubstr("max_attempts"));
  options = ClientOptions();
  options.deadline = absl::ZeroDuration();
  EXPECT_THAT(PredictionClient::Connect("127.0.0.1:1", options).status().message(),
              HasSubstr("deadline"));
}

TEST(PredictionClientTest, RejectsBadTlsAndTokenOptions) {
  ClientOptions options;
  options.tls.enabled = true;
  options.tls.cert_file = "/nonexistent/client.pem";
  EXPECT_THAT(PredictionClient::Connect("127.0.0.1:1", options).status().message(),
              HasSubstr("both the certificate and the key"));

  options = ClientOptions();
  options.tls.enabled = true;
  options.tls.ca_file = "/nonexistent/ca.pem";
  auto missing = PredictionClient::Connect("127.0.0.1:1", options);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/ca.pem"));

  // A readable file that is not PEM (this test's own source would do; the
  // data directory's device file is always there).
  options.tls.ca_file = std::string(HABITAT_DATA_DIR) + "/devices.textproto";
  EXPECT_THAT(PredictionClient::Connect("127.0.0.1:1", options).status().message(),
              HasSubstr("is not a PEM file"));

  options = ClientOptions();
  options.bearer_token = "two words";
  EXPECT_THAT(PredictionClient::Connect("127.0.0.1:1", options).status().message(),
              HasSubstr("whitespace"));
}

TEST(PredictionClientTest, UnreachableServerIsUnavailableAfterBoundedRetries) {
  const std::string address = absl::StrCat("127.0.0.1:", UnusedPort());
  ClientOptions options;
  options.max_attempts = 3;
  options.initial_backoff = absl::Milliseconds(20);
  auto client = PredictionClient::Connect(address, options);
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Time start = absl::Now();
  auto devices = (*client)->ListDevices();
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(devices.status().message(), HasSubstr(address));
  EXPECT_THAT(devices.status().message(), HasSubstr("ListDevices, 3 attempts"));
  EXPECT_EQ((*client)->last_attempts(), 3);
  // Backoff 20 ms + 40 ms between the attempts, far below the deadline.
  EXPECT_GE(took, absl::Milliseconds(60));
  EXPECT_LT(took, absl::Seconds(20));
}

TEST(PredictionClientTest, SingleAttemptDoesNotRetry) {
  ClientOptions options;
  options.max_attempts = 1;
  auto client = PredictionClient::Connect(absl::StrCat("127.0.0.1:", UnusedPort()), options);
  ASSERT_TRUE(client.ok());
  auto response = (*client)->Predict(v1::PredictRequest());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(response.status().message(), HasSubstr("1 attempt)"));
  EXPECT_EQ((*client)->last_attempts(), 1);
}

TEST(PredictionClientTest, WaitForReadyTurnsAnUnreachableServerIntoADeadline) {
  ClientOptions options;
  options.wait_for_ready = true;
  options.deadline = absl::Milliseconds(300);
  const std::string address = absl::StrCat("127.0.0.1:", UnusedPort());
  auto client = PredictionClient::Connect(address, options);
  ASSERT_TRUE(client.ok());
  auto response = (*client)->ListCatalogs();
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(response.status().message(), HasSubstr(address));
}

}  // namespace
}  // namespace habitat
