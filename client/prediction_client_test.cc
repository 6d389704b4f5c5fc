// PredictionClient against no server and against a flaky stand-in that
// counts attempts; calls against the real server are in
// tests/integration/server_integration_test.cc.
#include "client/prediction_client.h"

#include <atomic>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "habitat/v1/prediction_service.grpc.pb.h"
#include "testing/ports.h"

namespace habitat {
namespace {

using ::habitat::testing::UnusedPort;
using ::testing::HasSubstr;

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
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(devices.status().message(), HasSubstr(address));
  EXPECT_THAT(devices.status().message(), HasSubstr("ListDevices, up to 3 attempts"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST(PredictionClientTest, SingleAttemptDoesNotRetry) {
  ClientOptions options;
  options.max_attempts = 1;
  auto client = PredictionClient::Connect(absl::StrCat("127.0.0.1:", UnusedPort()), options);
  ASSERT_TRUE(client.ok());
  auto response = (*client)->Predict(v1::PredictRequest());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(response.status().message(), HasSubstr("1 attempt)"));
}

// ListDevices fails with `code` for the first `failures` calls. It counts
// the calls, and the attempts gRPC's retry policy marks as retries
// (grpc-previous-rpc-attempts): a hand-written retry loop sends none.
class FlakyService final : public v1::PredictionService::Service {
 public:
  FlakyService(grpc::StatusCode code, int failures) : code_(code), failures_(failures) {}

  grpc::Status ListDevices(grpc::ServerContext* context, const v1::ListDevicesRequest*,
                           v1::ListDevicesResponse*) override {
    if (context->client_metadata().count("grpc-previous-rpc-attempts") > 0) ++marked_retries;
    if (++calls <= failures_) return grpc::Status(code_, "flaky");
    return grpc::Status::OK;
  }

  std::atomic<int> calls{0};
  std::atomic<int> marked_retries{0};

 private:
  const grpc::StatusCode code_;
  const int failures_;
};

struct FlakyServer {
  FlakyServer(grpc::StatusCode code, int failures) : service(code, failures) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  }
  ~FlakyServer() { server->Shutdown(); }

  absl::StatusOr<v1::ListDevicesResponse> ListDevices(int max_attempts) {
    ClientOptions options;
    options.max_attempts = max_attempts;
    options.initial_backoff = absl::Milliseconds(10);
    auto client = PredictionClient::Connect(absl::StrCat("127.0.0.1:", port), options);
    if (!client.ok()) return client.status();
    return (*client)->ListDevices();
  }

  FlakyService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

TEST(PredictionClientTest, GrpcRetriesUnavailable) {
  FlakyServer flaky(grpc::StatusCode::UNAVAILABLE, 2);
  ASSERT_NE(flaky.server, nullptr);
  auto devices = flaky.ListDevices(3);
  EXPECT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(flaky.service.calls, 3);
  EXPECT_EQ(flaky.service.marked_retries, 2);
}

TEST(PredictionClientTest, RetriesAreBoundedAndSaySo) {
  FlakyServer flaky(grpc::StatusCode::UNAVAILABLE, 100);
  ASSERT_NE(flaky.server, nullptr);
  auto devices = flaky.ListDevices(4);
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(devices.status().message(), HasSubstr("up to 4 attempts"));
  EXPECT_EQ(flaky.service.calls, 4);
  FlakyServer once(grpc::StatusCode::UNAVAILABLE, 100);
  EXPECT_EQ(once.ListDevices(1).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(once.service.calls, 1);
}

// Any other code is the server's answer: asking again would get the same.
TEST(PredictionClientTest, OtherCodesAreNotRetried) {
  for (grpc::StatusCode code :
       {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::UNAUTHENTICATED,
        grpc::StatusCode::RESOURCE_EXHAUSTED}) {
    FlakyServer flaky(code, 1);
    ASSERT_NE(flaky.server, nullptr);
    EXPECT_EQ(static_cast<int>(flaky.ListDevices(3).status().code()), static_cast<int>(code));
    EXPECT_EQ(flaky.service.calls, 1) << code;
  }
}

TEST(PredictionClientTest, RetryServiceConfigFollowsTheOptions) {
  ClientOptions options;
  options.max_attempts = 1;
  EXPECT_EQ(RetryServiceConfig(options), "{}");
  options.max_attempts = 4;
  options.initial_backoff = absl::Milliseconds(100);
  const std::string config = RetryServiceConfig(options);
  EXPECT_THAT(config, HasSubstr(R"("maxAttempts":4)"));
  EXPECT_THAT(config, HasSubstr(R"("initialBackoff":"0.100000000s")"));
  EXPECT_THAT(config, HasSubstr(R"("maxBackoff":"0.400000000s")"));
  EXPECT_THAT(config, HasSubstr(R"("retryableStatusCodes":["UNAVAILABLE"])"));
  options.max_attempts = kMaxClientAttempts + 1;
  EXPECT_THAT(PredictionClient::Connect("127.0.0.1:1", options).status().message(),
              HasSubstr("gRPC's limit"));
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
