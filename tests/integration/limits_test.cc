// Server-side limits of a real in-process habitat-server: concurrent RPCs
// (--max_concurrent_rpcs), the per-request time cap (--max_request_seconds)
// and the ranges Start refuses. The trace-size limits are in bad_input_test.
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/prediction_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/prediction_server.h"
#include "testing/kineto_fixtures.h"
#include "testing/metrics.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;

class LimitsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto trace = testing::LoadFixtureTrace(testing::kFixtureTrace);
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = new v1::Trace(std::move(*trace));
  }
  static void TearDownTestSuite() { delete trace_; }

  void Start(int max_concurrent_rpcs, absl::Duration max_request_time) {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.metrics_address = "127.0.0.1:0";
    options.backend.data_dir = HABITAT_DATA_DIR;
    options.max_concurrent_rpcs = max_concurrent_rpcs;
    options.max_request_time = max_request_time;
    auto server = PredictionServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ClientOptions client_options;
    client_options.max_attempts = 1;
    client_options.deadline = absl::Seconds(120);
    auto client =
        PredictionClient::Connect(absl::StrCat("127.0.0.1:", server_->port()), client_options);
    ASSERT_TRUE(client.ok());
    client_ = std::move(*client);
  }
  void TearDown() override {
    client_.reset();
    if (server_ != nullptr) {
      server_->Shutdown(absl::Seconds(1));
      server_->Wait();
    }
  }

  // A valid Predict that keeps a handler busy for a while: the fixture's
  // operations repeated to ~10k (~6 MB), predicted on every GPU.
  static v1::PredictRequest SlowRequest() {
    v1::PredictRequest request;
    v1::Trace* trace = request.mutable_trace();
    *trace = *trace_;
    const int original = trace_->operations_size();
    while (trace->operations_size() + original <= 10000) {
      for (int i = 0; i < original; ++i) *trace->add_operations() = trace_->operations(i);
    }
    return request;
  }

  static v1::Trace* trace_;
  std::unique_ptr<PredictionServer> server_;
  std::unique_ptr<PredictionClient> client_;
};

v1::Trace* LimitsTest::trace_ = nullptr;

TEST_F(LimitsTest, CallsBeyondMaxConcurrentRpcsAreRefusedAsBusy) {
  Start(/*max_concurrent_rpcs=*/1, absl::ZeroDuration());
  const v1::PredictRequest slow = SlowRequest();
  absl::Status refused;
  // The slow call holds the only slot; ListDevices calls made meanwhile
  // are refused. Retried a few times in case the slow call was not yet
  // admitted while the others ran.
  for (int attempt = 0; attempt < 5 && refused.ok(); ++attempt) {
    std::atomic<bool> done{false};
    absl::Status slow_status;
    std::thread worker([&] {
      slow_status = client_->Predict(slow).status();
      done = true;
    });
    while (!done && refused.ok()) {
      absl::Status status = client_->ListDevices().status();
      if (status.code() == absl::StatusCode::kResourceExhausted) refused = status;
    }
    worker.join();
    // Whichever of the two got the slot, the refused one was busy-refused.
    if (!slow_status.ok()) {
      EXPECT_EQ(slow_status.code(), absl::StatusCode::kResourceExhausted) << slow_status;
      refused = slow_status;
    }
  }
  ASSERT_FALSE(refused.ok()) << "no call was ever refused as busy";
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("server busy: 1 concurrent RPCs (limit --max_concurrent_rpcs)"));
  // Idle again: served, and the in-flight gauge is back to 0.
  EXPECT_TRUE(client_->ListDevices().ok());
  auto metrics = testing::ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(*metrics, HasSubstr("habitat_rpcs_in_flight 0"));
  const auto counts = testing::CounterValues(*metrics, "habitat_requests_total");
  double exhausted = 0;
  for (const auto& [labels, value] : counts) {
    if (labels.find("code=RESOURCE_EXHAUSTED") != std::string::npos) exhausted += value;
  }
  EXPECT_GE(exhausted, 1);
}

TEST_F(LimitsTest, RequestsPastMaxRequestSecondsStopWithDeadlineExceeded) {
  // 1 us: any real trace takes longer to validate.
  Start(/*max_concurrent_rpcs=*/0, absl::Microseconds(1));
  v1::PredictRequest request;
  *request.mutable_trace() = *trace_;
  auto predicted = client_->Predict(request);
  ASSERT_FALSE(predicted.ok());
  EXPECT_EQ(predicted.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(predicted.status().message()),
              HasSubstr("the server's per-request limit of 1us (--max_request_seconds)"));
  v1::UploadTraceRequest upload;
  *upload.mutable_trace() = *trace_;
  auto uploaded = client_->UploadTrace(upload);
  EXPECT_EQ(uploaded.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(uploaded.status().message()), HasSubstr("--max_request_seconds"));
  // Calls with no expensive stage are not affected.
  EXPECT_TRUE(client_->ListCatalogs().ok());
}

TEST_F(LimitsTest, GenerousLimitsLetRealRequestsThrough) {
  Start(/*max_concurrent_rpcs=*/4, absl::Seconds(60));
  v1::PredictRequest request;
  *request.mutable_trace() = *trace_;
  auto predicted = client_->Predict(request);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_GE(predicted->predictions_size(), 10);
}

// Start owns the range of every option (habitat-server passes its flags
// through), and its messages name the flags: one case per range.
TEST(StartRangeTest, EachOptionOutOfRangeIsRefusedNamingItsFlag) {
  constexpr int64_t kMib = int64_t{1} << 20;
  const absl::Duration past_limit = absl::Seconds(int64_t{1000000000}) + absl::Nanoseconds(1);
  using Change = std::function<void(ServerOptions&)>;
  const std::pair<Change, std::string> cases[] = {
      {[](ServerOptions& o) { o.max_receive_message_bytes = 0; },
       "--max_message_mb must be 1..2047"},
      // What habitat-server passes for --max_message_mb=2048 or more.
      {[](ServerOptions& o) { o.max_receive_message_bytes = std::numeric_limits<int>::max(); },
       "--max_message_mb must be 1..2047"},
      {[](ServerOptions& o) { o.max_concurrent_rpcs = -1; }, "--max_concurrent_rpcs must be >= 0"},
      // What habitat-server passes for --max_request_seconds=nan.
      {[](ServerOptions& o) { o.max_request_time = -absl::InfiniteDuration(); },
       "--max_request_seconds must be >= 0"},
      {[&](ServerOptions& o) { o.request_memory_bytes = ((int64_t{1} << 30) + 1) * kMib; },
       "--request_memory_mib must be 0..2^30"},
      {[](ServerOptions& o) { o.request_memory_bytes = -1; },
       "--request_memory_mib must be 0..2^30"},
      {[](ServerOptions& o) { o.work_threads = -1; }, "--work_threads must be >= 0"},
      {[](ServerOptions& o) { o.trace_retention_days = -1; },
       "--trace_retention_days must be >= 0 (got -1)"},
      {[](ServerOptions& o) { o.tenant_quota.max_traces = -1; },
       "--tenant_max_traces and --tenant_max_mib must be >= 0"},
      {[](ServerOptions& o) { o.tenant_quota.max_bytes = -kMib; },
       "--tenant_max_traces and --tenant_max_mib must be >= 0"},
      {[&](ServerOptions& o) { o.tenant_quota.max_bytes = ((int64_t{1} << 40) + 1) * kMib; },
       "--tenant_max_mib at most 2^40"},
      {[](ServerOptions& o) { o.backend.max_predict_work = -1; },
       "--max_predict_work must be >= 0"},
      {[](ServerOptions& o) { o.backend.trace_limits.max_operations = 0; },
       "--max_trace_operations must be >= 1 (got 0)"},
      {[](ServerOptions& o) { o.backend.trace_limits.max_kernels_per_pass = 0; },
       "--max_trace_kernels_per_pass must be >= 1 (got 0)"},
      {[](ServerOptions& o) { o.backend.trace_limits.max_total_kernels = 0; },
       "--max_trace_kernels must be >= 1 (got 0)"},
      {[](ServerOptions& o) { o.backend.trace_limits.max_host_events = -3; },
       "--max_trace_host_events must be >= 1 (got -3)"},
      {[](ServerOptions& o) { o.backend.trace_limits.max_name_bytes = 0; },
       "--max_trace_name_bytes must be >= 1 (got 0)"},
      {[&](ServerOptions& o) {
         o.connections.grpc_memory_quota_bytes = ((int64_t{1} << 30) + 1) * kMib;
       },
       "--grpc_memory_quota_mb must be 0..2^30"},
      {[&](ServerOptions& o) { o.connections.max_idle = past_limit; },
       "--max_connection_idle_seconds must be 0..1e9 seconds"},
      {[&](ServerOptions& o) { o.connections.max_age = past_limit; },
       "--max_connection_age_seconds must be 0..1e9 seconds"},
      {[&](ServerOptions& o) { o.connections.max_age_grace = past_limit; },
       "--max_connection_age_grace_seconds must be 0..1e9 seconds"},
      {[&](ServerOptions& o) { o.connections.handshake_timeout = past_limit; },
       "--handshake_timeout_seconds must be 0..1e9 seconds"},
      {[&](ServerOptions& o) { o.connections.min_client_ping_interval = past_limit; },
       "--min_client_ping_interval_seconds must be 0..1e9 seconds"},
      {[&](ServerOptions& o) { o.connections.self_probe_interval = -absl::InfiniteDuration(); },
       "--self_probe_seconds must be 0..1e9 seconds"},
  };
  for (const auto& [change, expected] : cases) {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.metrics_address = "";
    options.backend.data_dir = HABITAT_DATA_DIR;
    change(options);
    auto server = PredictionServer::Start(options);
    ASSERT_FALSE(server.ok()) << expected;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << expected;
    EXPECT_THAT(std::string(server.status().message()), HasSubstr(expected));
  }
}

}  // namespace
}  // namespace habitat
