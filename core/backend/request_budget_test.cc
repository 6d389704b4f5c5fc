#include "core/backend/request_budget.h"

#include <memory>
#include <string>

#include "core/backend/prediction_backend.h"
#include "core/testing/trace_fixtures.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

class RequestBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto trace = testing::LoadKinetoFixture("h100", "transformer_b32_bf16", 32);
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = std::move(*trace);
  }

  std::unique_ptr<PredictionBackend> Backend(int64_t max_response, int64_t max_memory) {
    BackendOptions options;
    options.data_dir = HABITAT_DATA_DIR;
    options.max_response_bytes = max_response;
    options.max_request_memory_bytes = max_memory;
    auto backend = PredictionBackend::Create(options, std::make_unique<InMemoryTraceStore>());
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? std::move(*backend) : nullptr;
  }

  v1::PredictRequest Request(bool breakdown) const {
    v1::PredictRequest request;
    *request.mutable_trace() = trace_;
    request.set_include_breakdown(breakdown);
    return request;
  }

  v1::Trace trace_;
};

// The bound must be a lower bound, or a breakdown that fits is refused.
TEST_F(RequestBudgetTest, TheBreakdownBoundIsBelowTheRealAnswer) {
  auto backend = Backend(0, 0);
  v1::PredictRequest request = Request(true);
  request.add_devices("A100-SXM-40GB");
  request.add_devices("L4");
  auto response = backend->Predict(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_LE(BreakdownBytesAtLeast(trace_, 2), static_cast<int64_t>(response->ByteSizeLong()));
  EXPECT_GT(BreakdownBytesAtLeast(trace_, 2), static_cast<int64_t>(response->ByteSizeLong()) / 4);
}

TEST_F(RequestBudgetTest, ABreakdownTooLargeToSendIsRefusedBeforeItIsComputed) {
  const int64_t limit = BreakdownBytesAtLeast(trace_, 21) / 2;
  auto backend = Backend(limit, 0);
  PredictionStats stats;
  auto refused = backend->Predict(Request(true), &stats);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("--max_message_mb) by "), std::string::npos)
      << refused.status();
  EXPECT_EQ(stats.cache_misses, 0) << "predicted before refusing";
  // The same call without the breakdown is small and answered.
  auto answered = backend->Predict(Request(false));
  EXPECT_TRUE(answered.ok()) << answered.status();
}

TEST_F(RequestBudgetTest, APredictAboveTheMemoryBudgetIsRefusedBeforeWork) {
  auto backend = Backend(0, int64_t{1} << 20);
  PredictionStats stats;
  auto refused = backend->Predict(Request(true), &stats);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("(--request_memory_mib) by "), std::string::npos)
      << refused.status();
  EXPECT_EQ(stats.cache_misses, 0);
  v1::PredictRequest rescaled = Request(false);
  rescaled.set_batch_size(64);
  EXPECT_EQ(backend->Predict(rescaled).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(backend->Predict(Request(false)).ok());
}

}  // namespace
}  // namespace habitat
