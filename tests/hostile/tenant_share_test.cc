// One tenant's expensive calls used to hold every work thread: two heavy
// Predicts on a two-thread server, and another tenant's small Predict
// waited behind them until its deadline passed. With a token file a
// tenant now holds at most all but one thread, so the other tenant's call
// runs at once.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "habitat/v1/prediction_service.grpc.pb.h"
#include "testing/server_process.h"
#include "tests/hostile/hostile_support.h"

namespace habitat::hostile {
namespace {

using ::habitat::testing::ServerProcess;
using ::habitat::testing::ServerSpec;

constexpr char kHeavyToken[] = "Heavy-tenant-token-0123456789ab";
constexpr char kLightToken[] = "Light-tenant-token-0123456789ab";
// Seconds of work each on one thread, several times the light call's
// deadline.
constexpr int kHeavyOperations = 96000;
constexpr int kHeavyCalls = 2;
constexpr absl::Duration kLightDeadline = absl::Milliseconds(1500);

// A Predict as `token`'s tenant of `trace`, or of the stored trace `id`.
grpc::Status Predict(v1::PredictionService::Stub& stub, const v1::Trace* trace,
                     const std::string& id, const std::string& token, absl::Duration deadline) {
  v1::PredictRequest request;
  if (trace != nullptr) {
    *request.mutable_trace() = *trace;
  } else {
    request.set_trace_id(id);
  }
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  v1::PredictResponse response;
  return stub.Predict(&context, request, &response);
}

TEST(TenantShareTest, AnotherTenantsCallRunsWhileOneTenantsCallsHoldTheRest) {
  const std::string token_file = absl::StrCat(::testing::TempDir(), "/share-tokens-", getpid());
  std::ofstream(token_file) << "heavy " << kHeavyToken << "\nlight " << kLightToken << "\n";
  ServerSpec spec;
  spec.flags = {"--token_file=" + token_file, "--work_threads=2", "--cache_entries=0",
                "--max_request_seconds=60"};
  ServerProcess server(spec);
  ASSERT_TRUE(server.WaitServing()) << server.Stderr();
  auto stub = v1::PredictionService::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));

  // The heavy tenant's trace stored first, so that its Predicts (by id)
  // reach the work threads at once, with nothing to parse.
  std::string heavy_id;
  {
    v1::UploadTraceRequest upload;
    *upload.mutable_trace() = RepeatedAgentTrace(kHeavyOperations, /*with_host_events=*/false);
    grpc::ClientContext context;
    context.AddMetadata("authorization", absl::StrCat("Bearer ", kHeavyToken));
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::UploadTraceResponse uploaded;
    const grpc::Status status = stub->UploadTrace(&context, upload, &uploaded);
    ASSERT_TRUE(status.ok()) << status.error_message();
    heavy_id = uploaded.trace_id();
  }
  std::vector<grpc::Status> heavy_status(kHeavyCalls);
  std::vector<std::thread> heavy_callers;
  for (int i = 0; i < kHeavyCalls; ++i) {
    heavy_callers.emplace_back([&, i] {
      heavy_status[i] = Predict(*stub, nullptr, heavy_id, kHeavyToken, absl::Seconds(60));
    });
  }
  absl::SleepFor(absl::Milliseconds(300));
  const v1::Trace light = RepeatedAgentTrace(300, /*with_host_events=*/false);
  const absl::Time started = absl::Now();
  const grpc::Status status = Predict(*stub, &light, "", kLightToken, kLightDeadline);
  const absl::Duration took = absl::Now() - started;
  for (auto& caller : heavy_callers) caller.join();
  unlink(token_file.c_str());

  EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message() << " after "
                           << took;
  for (const grpc::Status& heavy_call : heavy_status) {
    EXPECT_TRUE(heavy_call.ok()) << heavy_call.error_code() << " " << heavy_call.error_message();
  }
}

}  // namespace
}  // namespace habitat::hostile
