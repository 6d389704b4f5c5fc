// The work estimate that --max_predict_work bounds must track the CPU a
// Predict really takes, whatever the request asks for: a limit on an
// estimate that misses the expensive parts bounds nothing.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/prediction_backend.h"
#include "core/testing/trace_fixtures.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

int64_t CpuNs() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

struct Kind {
  std::string name;
  v1::PredictRequest request;
};

TEST(WorkEstimateTest, TracksCpuWithinTwiceAcrossRequestKinds) {
  BackendOptions options;
  options.data_dir = HABITAT_DATA_DIR;
  options.cache_entries = 0;  // every call cold
  options.max_predict_work = 0;
  auto backend = PredictionBackend::Create(options, std::make_unique<InMemoryTraceStore>());
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto trace = testing::LoadKinetoFixture("h100", "transformer_b32_bf16", 32);
  ASSERT_TRUE(trace.ok()) << trace.status();

  std::vector<Kind> kinds(7);
  kinds[0].name = "plain";
  kinds[1].name = "breakdown";
  kinds[1].request.set_include_breakdown(true);
  kinds[2].name = "batch 64";
  kinds[2].request.set_batch_size(64);
  kinds[3].name = "16 parallel";
  for (uint32_t n = 1; n <= 16; ++n) {
    v1::ParallelConfig* c = kinds[3].request.add_parallel();
    c->set_gpus_per_node(8);
    c->set_nodes(n);
  }
  kinds[4].name = "unattributed";
  v1::Trace unattributed = *trace;
  for (int i = 0; i < 20; ++i) {
    for (const v1::Operation& op : trace->operations()) {
      for (const v1::Kernel& k : op.forward().kernels())
        *unattributed.add_unattributed_kernels() = k;
    }
  }
  kinds[5].name = "1 GPU";
  kinds[5].request.add_devices("L4");
  kinds[6].name = "1 GPU 16 par.";
  kinds[6].request = kinds[3].request;
  kinds[6].request.add_devices("H100-SXM");
  for (Kind& kind : kinds) {
    *kind.request.mutable_trace() = kind.name == "unattributed" ? unattributed : *trace;
  }
  // The units the engine charges, as its refusal names them.
  BackendOptions refusing = options;
  refusing.max_predict_work = 1;
  auto limited = PredictionBackend::Create(refusing, std::make_unique<InMemoryTraceStore>());
  ASSERT_TRUE(limited.ok());
  const auto WorkOf = [&](const v1::PredictRequest& request) -> int64_t {
    const std::string message((*limited)->Predict(request).status().message());
    const size_t is = message.find(" is ");
    return is == std::string::npos ? -1 : std::atoll(message.c_str() + is + 4);
  };
  double lowest = 1e300, highest = 0;
  for (const Kind& kind : kinds) {
    const int64_t start = CpuNs();
    auto response = (*backend)->Predict(kind.request);
    const int64_t cpu = CpuNs() - start;
    ASSERT_TRUE(response.ok()) << kind.name << ": " << response.status();
    const int64_t work = WorkOf(kind.request);
    ASSERT_GT(work, 0) << kind.name;
    const double per_unit = static_cast<double>(cpu) / static_cast<double>(work);
    std::fprintf(stderr, "%-14s cpu %9.1f ms  work %10lld  %.0f ns/unit\n", kind.name.c_str(),
                 cpu / 1e6, static_cast<long long>(work), per_unit);
    lowest = std::min(lowest, per_unit);
    highest = std::max(highest, per_unit);
  }
  // Within 2x of each other's middle: at most 4x between the extremes.
  EXPECT_LE(highest / lowest, 4.0);
}

}  // namespace
}  // namespace habitat
