// Calls beyond --max_concurrent_rpcs are refused at once. Handlers used to
// compute on gRPC's few callback threads, so the server saw only those calls
// in flight (2 of 100 concurrent cold ones), refused none and queued the
// rest invisibly inside gRPC, each holding its request. Now gRPC's threads
// only admit a call and a work queue computes it, so the slots count every
// call the server has accepted.
#include <atomic>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "habitat/v1/prediction_service.grpc.pb.h"
#include "testing/metrics.h"
#include "testing/server_process.h"
#include "tests/hostile/hostile_support.h"

namespace habitat::hostile {
namespace {

using ::habitat::testing::HttpGet;
using ::habitat::testing::ServerProcess;
using ::habitat::testing::ServerSpec;

constexpr int kMaxConcurrent = 4;
constexpr int kCalls = 16;
// The real ResNet-50 trace repeated to this many operations: about half a
// second of work for all GPUs, so the calls overlap on one work thread.
constexpr int kOperations = 8000;

TEST(LoadSheddingTest, CallsBeyondTheLimitAreRefusedAtOnce) {
  ServerSpec spec;
  spec.flags = {"--metrics_address=127.0.0.1:0",
                absl::StrCat("--max_concurrent_rpcs=", kMaxConcurrent), "--work_threads=1",
                "--cache_entries=0"};
  ServerProcess server(spec);
  ASSERT_TRUE(server.WaitServing()) << server.Stderr();
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::PredictionService::NewStub(channel);
  const v1::Trace trace = RepeatedAgentTrace(kOperations, /*with_host_events=*/false);

  std::atomic<int> ok{0}, refused{0}, other{0};
  std::atomic<int> ready{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < kCalls; ++i) {
    callers.emplace_back([&, i] {
      v1::PredictRequest request;
      *request.mutable_trace() = trace;
      request.mutable_trace()->set_model_name(absl::StrCat("shed-", i));
      ++ready;
      while (ready.load() < kCalls) std::this_thread::yield();
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      v1::PredictResponse response;
      const grpc::Status status = stub->Predict(&context, request, &response);
      if (status.ok()) {
        ++ok;
      } else if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        ++refused;
      } else {
        ++other;
      }
    });
  }
  for (auto& caller : callers) caller.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_GE(ok.load(), kMaxConcurrent);
  // All calls arrive within a fraction of one call's work; those beyond the
  // limit must be refused, not queued.
  EXPECT_GE(refused.load(), kCalls / 2) << ok << " OK";

  const std::string scrape = HttpGet(server.metrics_port(), "/metrics", absl::Seconds(5));
  EXPECT_THAT(scrape, ::testing::HasSubstr("\nhabitat_rpcs_queued 0"));
  EXPECT_THAT(scrape, ::testing::HasSubstr("\nhabitat_rpcs_in_flight 0"));
}

}  // namespace
}  // namespace habitat::hostile
