// Host-timeline replay on real H100 fixtures: one GPU-bound iteration
// (ResNet-50, batch 64, fp32: GPU busy 95% of wall) and one host-bound one
// (Transformer, batch 32, bf16: GPU busy 13% of wall).
#include "core/predict/host_replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/file_io.h"
#include "core/devices/device_database.h"
#include "core/kineto/kineto_import.h"
#include "core/predict/prediction_engine.h"
#include "core/predict/warning_tally.h"
#include "core/testing/trace_fixtures.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace {

std::vector<double> Uniform(const v1::Trace& trace, double scale) {
  return std::vector<double>(2 * trace.operations_size() + 1, scale);
}

// The profiled step's length, which the Kineto importer keeps.
double ProfiledStepNs(const v1::Trace& trace) {
  return std::stod(trace.metadata().at("kineto.profiled_step_ns"));
}

// Imported with their measured wall times, as `habitat predict --wall-ns`
// does: the host timelines stay as profiled.
class HostReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpu_bound = testing::LoadKinetoFixture(
        "h100", "resnet50_b64_fp32", 64, *testing::MeasuredWallNs("h100", "resnet50_b64_fp32"));
    auto host_bound =
        testing::LoadKinetoFixture("h100", "transformer_b32_bf16", 32,
                                   *testing::MeasuredWallNs("h100", "transformer_b32_bf16"));
    ASSERT_TRUE(gpu_bound.ok()) << gpu_bound.status();
    ASSERT_TRUE(host_bound.ok()) << host_bound.status();
    gpu_bound_ = std::move(*gpu_bound);
    host_bound_ = std::move(*host_bound);
  }
  v1::Trace gpu_bound_, host_bound_;
};

TEST_F(HostReplayTest, ReplayingTheOriginReproducesItsProfile) {
  for (const v1::Trace* trace : {&gpu_bound_, &host_bound_}) {
    ASSERT_TRUE(HasHostTimeline(*trace));
    auto replay = ReplayIteration(*trace, Uniform(*trace, 1.0));
    ASSERT_TRUE(replay.ok()) << replay.status();
    // Busy time: same kernels, same order; only launch latencies are lost.
    EXPECT_NEAR(replay->gpu_busy_ns, trace->iteration_gpu_busy_ns(),
                0.03 * trace->iteration_gpu_busy_ns())
        << trace->model_name();
    // Wall time: the profiled step (ProfilerStep annotation).
    const double profiled = ProfiledStepNs(*trace);
    EXPECT_NEAR(replay->wall_ns, profiled, 0.10 * profiled) << trace->model_name();
  }
}

TEST(HostReplayStreamsTest, CrossStreamOrderOfTheOriginIsKept) {
  // GNMT's cuDNN LSTM runs on several streams that events serialise: an
  // activity that started after another ended on the origin must not
  // overlap it in the replay (before the fix, the H200 capture replayed to
  // 28.5 ms of GPU-busy time against 39.7 ms measured).
  for (const char* gpu : {"h100", "h200"}) {
    // As profiled (the measured wall time given): the origin as it ran.
    auto trace = testing::LoadKinetoFixture(gpu, "gnmt_b64_fp32", 64,
                                            *testing::MeasuredWallNs(gpu, "gnmt_b64_fp32"));
    ASSERT_TRUE(trace.ok()) << trace.status();
    auto replay = ReplayIteration(*trace, Uniform(*trace, 1.0));
    ASSERT_TRUE(replay.ok()) << replay.status();
    EXPECT_NEAR(replay->gpu_busy_ns, trace->iteration_gpu_busy_ns(),
                0.03 * trace->iteration_gpu_busy_ns())
        << gpu;
  }
}

TEST_F(HostReplayTest, CalibrationMatchesTheMeasuredWallTime) {
  for (const char* name : {"resnet50_b64_fp32", "transformer_b32_bf16"}) {
    const v1::Trace& trace = std::string(name) == "resnet50_b64_fp32" ? gpu_bound_ : host_bound_;
    auto wall = testing::MeasuredWallNs("h100", name);
    ASSERT_TRUE(wall.ok()) << wall.status();
    EXPECT_EQ(trace.iteration_wall_ns(), *wall) << name;
    // The profiled step is slower than the unprofiled median.
    EXPECT_GT(ProfiledStepNs(trace), *wall) << name;
    auto scale = CalibrateHostScale(trace, *wall);
    ASSERT_TRUE(scale.ok()) << scale.status();
    EXPECT_LT(*scale, 1.0) << name;
    auto replay = ReplayIteration(trace, Uniform(trace, 1.0), *scale);
    ASSERT_TRUE(replay.ok());
    EXPECT_NEAR(replay->wall_ns, *wall, 0.01 * *wall) << name;
  }
}

TEST_F(HostReplayTest, FasterGpuShortensOnlyGpuBoundIterations) {
  // The host as fast as it ran without the profiler.
  auto wall = testing::MeasuredWallNs("h100", "resnet50_b64_fp32");
  ASSERT_TRUE(wall.ok());
  auto scale = CalibrateHostScale(gpu_bound_, *wall);
  ASSERT_TRUE(scale.ok());
  auto gpu_base = ReplayIteration(gpu_bound_, Uniform(gpu_bound_, 1.0), *scale);
  auto gpu_fast = ReplayIteration(gpu_bound_, Uniform(gpu_bound_, 0.5), *scale);
  auto host_base = ReplayIteration(host_bound_, Uniform(host_bound_, 1.0));
  auto host_fast = ReplayIteration(host_bound_, Uniform(host_bound_, 0.5));
  ASSERT_TRUE(gpu_base.ok() && gpu_fast.ok() && host_base.ok() && host_fast.ok());
  // Not 0.5: the calibrated host (the slowest one that explains the measured
  // wall time of a GPU-bound iteration) takes over once the GPU is faster.
  EXPECT_LT(gpu_fast->wall_ns, 0.8 * gpu_base->wall_ns);
  EXPECT_GT(host_fast->wall_ns, 0.9 * host_base->wall_ns);
  EXPECT_NEAR(gpu_fast->gpu_busy_ns, 0.5 * gpu_base->gpu_busy_ns, 0.02 * gpu_base->gpu_busy_ns);
}

TEST_F(HostReplayTest, MismatchedScalesAreRejected) {
  EXPECT_EQ(ReplayIteration(gpu_bound_, {1.0}).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Trace no_launches = gpu_bound_;
  for (auto& op : *no_launches.mutable_operations()) {
    for (auto& k : *op.mutable_forward()->mutable_kernels()) k.set_has_launch_time(false);
  }
  EXPECT_EQ(ReplayIteration(no_launches, Uniform(no_launches, 1.0)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A target host 1e-12 times as fast once gave an 80-year wall time through
// a signed overflow; scales like that are refused, and the largest accepted
// ones give large but ordered times, never wrapped ones.
TEST_F(HostReplayTest, ScalesOutOfRangeAreRejected) {
  const double inf = std::numeric_limits<double>::infinity();
  for (double host_scale : {0.0, -1.0, 1e12, 1e300, inf, std::nan("")}) {
    EXPECT_EQ(ReplayIteration(host_bound_, Uniform(host_bound_, 1.0), host_scale).status().code(),
              absl::StatusCode::kInvalidArgument)
        << host_scale;
  }
  for (double pass_scale : {-1.0, 1e12, inf, std::nan("")}) {
    std::vector<double> scales = Uniform(host_bound_, 1.0);
    scales[3] = pass_scale;
    EXPECT_EQ(ReplayIteration(host_bound_, scales).status().code(),
              absl::StatusCode::kInvalidArgument)
        << pass_scale;
  }
}

TEST_F(HostReplayTest, LargestScalesGiveOrderedTimes) {
  auto base = ReplayIteration(host_bound_, Uniform(host_bound_, 1.0), 1.0);
  auto slow_host = ReplayIteration(host_bound_, Uniform(host_bound_, 1.0), 1e6);
  auto slow_gpu = ReplayIteration(host_bound_, Uniform(host_bound_, 1e6), 1.0);
  ASSERT_TRUE(base.ok() && slow_host.ok() && slow_gpu.ok());
  for (const ReplayResult* r : {&*slow_host, &*slow_gpu}) {
    EXPECT_GT(r->wall_ns, base->wall_ns);
    EXPECT_GE(r->gpu_busy_ns, 0);
    EXPECT_LE(r->wall_ns, Nanoseconds{1} << 62);
  }
  // The host-bound iteration's wall time follows its host.
  EXPECT_GT(slow_host->wall_ns, base->wall_ns * 100000);
}

// Times near the int64 limits (ReplayIteration does not require a
// validated trace) saturate instead of overflowing.
TEST(HostReplayLimitsTest, TimesNearTheInt64LimitsSaturate) {
  v1::Trace trace;
  auto* op = trace.add_operations();
  op->set_cpu_start_ns(std::numeric_limits<int64_t>::max() - 5);
  op->set_cpu_duration_ns(std::numeric_limits<int64_t>::max());
  for (int64_t start : {std::numeric_limits<int64_t>::max() - 10, int64_t{0},
                        std::numeric_limits<int64_t>::min() + 10}) {
    auto* kernel = op->mutable_forward()->add_kernels();
    kernel->set_has_launch_time(true);
    kernel->set_launch_ns(start);
    kernel->set_start_ns(start);
    kernel->set_duration_ns(std::numeric_limits<int64_t>::max());
  }
  auto* wait = trace.add_host_events();
  wait->set_cpu_start_ns(std::numeric_limits<int64_t>::max() - 1);
  wait->set_cpu_duration_ns(std::numeric_limits<int64_t>::max());
  auto replay = ReplayIteration(trace, std::vector<double>(3, 1e6), 1e6);
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_GE(replay->wall_ns, 0);
  EXPECT_LE(replay->wall_ns, Nanoseconds{1} << 62);
  EXPECT_GE(replay->gpu_busy_ns, 0);
}

// Two launches 1 ns apart that a slow-host scale rounds to one time: the
// one that started first on the origin is replayed first (the order a
// stable sort by launch, then start, gives), whatever order the raw
// launches had, so the second waits for the first it followed there.
TEST(HostReplayOrderTest, LaunchesRoundedToOneTimeKeepTheirGpuOrder) {
  v1::Trace trace;
  auto add = [&trace](int64_t launch, int64_t start, uint32_t stream) {
    v1::Kernel* kernel = trace.add_operations()->mutable_forward()->add_kernels();
    kernel->set_launch_ns(launch);
    kernel->set_has_launch_time(true);
    kernel->set_start_ns(start);
    kernel->set_duration_ns(100);
    kernel->set_stream(stream);
  };
  add(101, 1000, 1);  // launched second, started first
  add(100, 2000, 2);  // on another stream, after the first had ended
  const std::vector<double> scales = Uniform(trace, 1.0);
  for (const double host_scale : {1.0, 0.001}) {
    auto plain = ReplayIteration(trace, scales, host_scale);
    ASSERT_TRUE(plain.ok()) << plain.status();
    auto planned = ReplayIteration(trace, *PlanReplay(trace), scales, host_scale);
    ASSERT_TRUE(planned.ok()) << planned.status();
    EXPECT_EQ(planned->wall_ns, plain->wall_ns) << host_scale;
    EXPECT_EQ(planned->gpu_busy_ns, plain->gpu_busy_ns) << host_scale;
  }
  // At 0.001 both launch at 0: the first kernel runs 0-100 and the second,
  // which waited for it on the origin, 100-200.
  auto slow_host = ReplayIteration(trace, scales, 0.001);
  ASSERT_TRUE(slow_host.ok()) << slow_host.status();
  EXPECT_EQ(slow_host->gpu_busy_ns, 200);
  EXPECT_EQ(slow_host->wall_ns, 200);
}

// A copy to the GPU from pageable memory stages and returns while earlier
// GPU work still runs (FSDP2's split-size copies): the host must not wait
// for that work in the replay, or the work it launches next on another
// stream starts a whole kernel late. A 1 ms kernel, a copy call at 10 us
// (5 us; its copy runs after the kernel), a 10 us kernel on another stream
// launched at 20 us: 1.004 ms of wall time, as on the origin.
TEST(HostReplayCopyTest, ACopyToTheGpuThatDidNotWaitDoesNotWaitInTheReplay) {
  v1::Trace trace;
  v1::Pass* pass = trace.add_operations()->mutable_forward();
  auto add_kernel = [pass](int64_t launch, int64_t start, int64_t duration, uint32_t stream) {
    v1::Kernel* k = pass->add_kernels();
    k->set_has_launch_time(true);
    k->set_launch_ns(launch);
    k->set_start_ns(start);
    k->set_duration_ns(duration);
    k->set_stream(stream);
  };
  add_kernel(0, 0, 1'000'000, 1);
  v1::MemoryActivity* copy = pass->add_memory();
  copy->set_kind(v1::MemoryActivity::KIND_MEMCPY_HTOD);
  copy->set_has_launch_time(true);
  copy->set_launch_ns(10'000);
  copy->set_start_ns(1'000'000);
  copy->set_duration_ns(4'000);
  copy->set_stream(1);
  add_kernel(20'000, 20'000, 10'000, 2);
  v1::HostEvent* call = trace.add_host_events();
  call->set_name("cudaMemcpyAsync");
  call->set_cpu_start_ns(10'000);
  call->set_cpu_duration_ns(5'000);
  auto replay = ReplayIteration(trace, Uniform(trace, 1.0));
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ(replay->wall_ns, 1'004'000);
  EXPECT_EQ(replay->gpu_busy_ns, 1'004'000);
  // A synchronisation there would wait: the second kernel after the first.
  call->set_name("cudaStreamSynchronize");
  replay = ReplayIteration(trace, Uniform(trace, 1.0));
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_GT(replay->wall_ns, 1'004'000);
}

// One stream of `count` kernels of `duration` ns, the host issuing one
// every `host_gap` ns of its own, as a GPU with CUDA's launch queue runs
// them: launch call k, recorded when it begins, returns once kernel k -
// kLaunchQueueDepth is done. One operation holds them, its CPU time ending
// `after_last` ns after the last launch.
v1::Trace QueuedStream(int count, int64_t duration, int64_t host_gap, int64_t after_last) {
  v1::Trace trace;
  v1::Operation* op = trace.add_operations();
  std::vector<int64_t> end(count);
  int64_t host = 0, gpu_free = 0;
  for (int k = 0; k < count; ++k) {
    v1::Kernel* kernel = op->mutable_forward()->add_kernels();
    kernel->set_has_launch_time(true);
    kernel->set_launch_ns(host);
    if (k >= static_cast<int>(kLaunchQueueDepth)) {
      host = std::max(host, end[k - static_cast<int>(kLaunchQueueDepth)]);
    }
    kernel->set_start_ns(std::max(host, gpu_free));
    kernel->set_duration_ns(duration);
    kernel->set_stream(1);
    gpu_free = end[k] = kernel->start_ns() + duration;
    host += host_gap;
  }
  op->set_cpu_duration_ns(host + after_last);
  return trace;
}

// On the origin the queue filled: after the first 1022 launches the host
// issued one kernel per 10 us kernel, waiting, not working. A GPU ten times
// as fast is fed at the host's own pace (1 us a launch), not the origin
// GPU's; the host alone takes its 3,000 launches, not the origin's 20 ms.
TEST(HostReplayQueueTest, AFullQueueOnTheOriginIsWaitingNotHostWork) {
  const v1::Trace trace = QueuedStream(3000, 10'000, 1'000, 0);
  auto origin = ReplayIteration(trace, Uniform(trace, 1.0));
  ASSERT_TRUE(origin.ok()) << origin.status();
  EXPECT_EQ(origin->wall_ns, 30'000'000);
  auto faster = ReplayIteration(trace, Uniform(trace, 0.1));
  ASSERT_TRUE(faster.ok()) << faster.status();
  EXPECT_NEAR(static_cast<double>(faster->wall_ns), 3'000'000, 2'000);
  EXPECT_NEAR(static_cast<double>(HostOnlyNs(trace, 1.0)), 3'000'000, 2'000);
}

// On the origin the queue never filled (0.5 us kernels, 1 us a launch);
// 100 times slower kernels fill it, so the host launches its last kernel
// once kernel 3000 - 1 - 1022 is done (99 ms in) and its 100 ms of work
// after that ends the iteration after the GPU's 150 ms.
TEST(HostReplayQueueTest, ASlowerGpuFillsTheQueueAndHoldsTheHost) {
  const v1::Trace trace = QueuedStream(3000, 500, 1'000, 100'000'000);
  auto slower = ReplayIteration(trace, Uniform(trace, 100.0));
  ASSERT_TRUE(slower.ok()) << slower.status();
  EXPECT_EQ(slower->gpu_busy_ns, 150'000'000);
  EXPECT_NEAR(static_cast<double>(slower->wall_ns), (3000 - 1022) * 50'000 + 100'000'000 + 1'000,
              2'000);
}

TEST_F(HostReplayTest, PredictionsCarryWallTimeAndTheHostBoundFlag) {
  auto devices = DeviceDatabase::LoadFromFile(std::string(HABITAT_DATA_DIR) + "/devices.textproto");
  ASSERT_TRUE(devices.ok()) << devices.status();
  // Imported with the measured (unprofiled) wall times, as with --wall-ns.
  const auto& h100 = **devices->Get("H100-SXM");
  const auto& h200 = **devices->Get("H200");
  auto gpu = PredictOnDevice(gpu_bound_, h100, h200);
  auto host = PredictOnDevice(host_bound_, h100, h200);
  ASSERT_TRUE(gpu.ok() && host.ok());
  EXPECT_FALSE(gpu->host_bound());
  EXPECT_TRUE(host->host_bound());
  EXPECT_GE(gpu->wall_time_ns(), gpu->gpu_busy_ns());
  EXPECT_GT(host->wall_time_ns(), 3 * host->gpu_busy_ns());
  // On the origin itself the calibrated replay gives back the measured wall.
  auto same = PredictOnDevice(host_bound_, h100, h100);
  ASSERT_TRUE(same.ok());
  EXPECT_NEAR(same->wall_time_ns(), host_bound_.iteration_wall_ns(),
              0.01 * host_bound_.iteration_wall_ns());
}

// A torch.profiler trace imported without a measured wall time: the
// origin's prediction says its wall time is a profiled one in exactly one
// warning, of one kind where the importer took its estimate of the
// profiler's cost out and of another where it could not (here: profiled
// without record_shapes); no other GPU's does, nor a trace imported with
// the measured wall time.
TEST(ProfiledHostTimelineTest, OriginWarnsOnceWhenItsWallTimeIsAProfiledOne) {
  auto text = ReadFile(std::string(HABITAT_TESTDATA_DIR) + "/kineto/h200/gpt2_b8_bf16.json.gz");
  ASSERT_TRUE(text.ok()) << text.status();
  nlohmann::json doc = nlohmann::json::parse(*text);
  KinetoImportOptions options;
  options.batch_size = 8;
  auto corrected = ImportKinetoTrace(*text, options);
  KinetoImportOptions measured_options = options;
  measured_options.iteration_wall_ns = *testing::MeasuredWallNs("h200", "gpt2_b8_bf16");
  auto measured = ImportKinetoTrace(*text, measured_options);
  doc["record_shapes"] = 0;
  auto profiled = ImportKinetoTrace(doc.dump(), options);
  ASSERT_TRUE(corrected.ok() && profiled.ok() && measured.ok())
      << corrected.status() << profiled.status() << measured.status();
  ASSERT_TRUE(ProfiledHostTimelineWarning(*corrected).has_value());
  EXPECT_EQ(ProfiledHostTimelineWarning(*corrected)->kind, warning_kind::kProfilerCostEstimated);
  ASSERT_TRUE(ProfiledHostTimelineWarning(*profiled).has_value());
  EXPECT_EQ(ProfiledHostTimelineWarning(*profiled)->kind, warning_kind::kProfiledHostTimeline);
  EXPECT_TRUE(absl::StartsWith(ProfiledHostTimelineWarning(*profiled)->text, "profiled: "));
  EXPECT_FALSE(ProfiledHostTimelineWarning(*measured).has_value());
  EXPECT_FALSE(ProfiledHostTimelineWarning(v1::Trace()).has_value());

  auto devices = DeviceDatabase::LoadFromFile(std::string(HABITAT_DATA_DIR) + "/devices.textproto");
  ASSERT_TRUE(devices.ok()) << devices.status();
  PredictionEngine engine(&*devices, nullptr);
  PredictionQuery query;
  query.devices = {"H200", "H100-SXM", "A100-SXM-80GB"};
  auto count = [](const auto& warnings) {
    int n = 0;
    for (const std::string& w : warnings) n += absl::StartsWith(w, "profiled:");
    return n;
  };
  for (const v1::Trace* trace : {&*corrected, &*profiled, &*measured}) {
    auto response = engine.Predict(*trace, "", query);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(count(response->warnings()), 0);
    for (const auto& p : response->predictions()) {
      const bool expected = trace != &*measured && p.is_origin();
      EXPECT_EQ(count(p.warnings()), expected ? 1 : 0) << p.device_id();
      if (!expected || trace != &*profiled) continue;
      EXPECT_EQ(p.device_id(), "H200");
      // The profiled step's wall time, 48 % above the unprofiled one.
      EXPECT_NEAR(p.wall_time_ns(), profiled->iteration_wall_ns(),
                  0.02 * profiled->iteration_wall_ns());
      EXPECT_GT(p.wall_time_ns(), 1.4 * *testing::MeasuredWallNs("h200", "gpt2_b8_bf16"));
    }
  }
}

}  // namespace
}  // namespace habitat
