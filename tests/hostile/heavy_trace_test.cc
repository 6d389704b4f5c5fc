// A trace near the size limits costs seconds of prediction on every GPU.
// The server used to finish that work after the client's deadline had
// passed (a ~100-byte Predict by id kept it busy 41 s past a 5 s deadline)
// and past the shutdown grace (SIGTERM took 26.7 s against 10 s). Now the
// engine checks the call's deadline and cancellation between GPUs and
// batches of operations, and shutdown cancels what outlives the grace.
#include <signal.h>

#include <atomic>
#include <memory>
#include <regex>
#include <string>
#include <thread>

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

// The real ResNet-50 trace, its operations repeated to this many (the
// default limit is 200,000) and its host events with them.
constexpr int kOperations = 80000;
// How late after its deadline, or after the shutdown grace, the server may
// still be working: a check every 1,024 operations is a few milliseconds
// apart, the host-timeline replay of one GPU (not interrupted) a few
// hundred; generous for sanitizer builds on 2 cores.
constexpr absl::Duration kStopSlack = absl::Seconds(2);

double InFlight(int metrics_port) {
  const std::string scrape = HttpGet(metrics_port, "/metrics", absl::Seconds(5));
  std::smatch match;
  static const std::regex line("\nhabitat_rpcs_in_flight ([0-9.e+-]+)");
  return std::regex_search(scrape, match, line) ? std::stod(match[1]) : -1;
}

class HeavyTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(ServerSpec{
        {"--metrics_address=127.0.0.1:0", "--max_request_seconds=0", "--request_memory_mib=0",
         "--max_predict_work=0", "--shutdown_grace_seconds=1"}});
    ASSERT_TRUE(server_->WaitServing()) << server_->Stderr();
    stub_ = v1::PredictionService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    v1::UploadTraceRequest upload;
    *upload.mutable_trace() = RepeatedAgentTrace(kOperations, /*with_host_events=*/true);
    upload.mutable_trace()->set_model_name("heavy");
    ASSERT_LT(upload.ByteSizeLong(), size_t{60} << 20) << "over the server's message limit";
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::UploadTraceResponse uploaded;
    const grpc::Status status = stub_->UploadTrace(&context, upload, &uploaded);
    ASSERT_TRUE(status.ok()) << status.error_message();
    trace_id_ = uploaded.trace_id();
  }

  grpc::Status PredictById(absl::Duration deadline) {
    v1::PredictRequest request;
    request.set_trace_id(trace_id_);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    v1::PredictResponse response;
    return stub_->Predict(&context, request, &response);
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::PredictionService::Stub> stub_;
  std::string trace_id_;
};

TEST_F(HeavyTraceTest, WorkStopsSoonAfterTheClientsDeadline) {
  const int metrics_port = server_->metrics_port();
  ASSERT_GT(metrics_port, 0) << server_->Stderr();
  const absl::Duration deadline = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  const grpc::Status status = PredictById(deadline);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << status.error_message() << ": the heavy trace predicted within " << deadline
      << "; make it heavier";
  // The handler is done when the in-flight gauge is back to 0.
  absl::Time idle = absl::InfiniteFuture();
  while (absl::Now() < start + deadline + 4 * kStopSlack) {
    if (InFlight(metrics_port) == 0) {
      idle = absl::Now();
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_LT(idle - start, deadline + kStopSlack)
      << "the server kept working on a call whose client had given up";
}

TEST_F(HeavyTraceTest, ShutdownHonoursItsGrace) {
  const int metrics_port = server_->metrics_port();
  ASSERT_GT(metrics_port, 0) << server_->Stderr();
  std::atomic<int> code{-1};
  std::thread call([&] { code = PredictById(absl::Seconds(60)).error_code(); });
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time term = absl::Now();
  ASSERT_EQ(kill(server_->pid(), SIGTERM), 0);
  // The handler is done when the in-flight gauge is back to 0 (the metrics
  // port lives until the process tears down). gRPC cancels the call for
  // the client at the end of the grace either way; the old server then
  // still computed it to the end before it could exit.
  absl::Time idle = absl::InfiniteFuture();
  while (absl::Now() < term + 10 * kStopSlack) {
    const double in_flight = InFlight(metrics_port);
    if (in_flight <= 0) {  // 0, or -1 once the port is gone
      idle = absl::Now();
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  while (server_->Alive() && absl::Now() < term + 10 * kStopSlack) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  call.join();
  EXPECT_FALSE(server_->Alive());
  // Grace 1 s (--shutdown_grace_seconds), then in-flight work is cancelled.
  EXPECT_LT(idle - term, absl::Seconds(1) + kStopSlack) << server_->Stderr();
  EXPECT_NE(code.load(), 0) << "the call finished: the trace is not heavy enough";
}

}  // namespace
}  // namespace habitat::hostile
