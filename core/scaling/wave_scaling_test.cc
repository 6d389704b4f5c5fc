#include "core/scaling/wave_scaling.h"

#include "core/scaling/test_devices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;

// 256-thread blocks, no registers or shared memory given: 8 warps -> 8
// blocks per SM on both GPUs, so a wave is 8 x 80 = 640 blocks on the V100
// and 8 x 108 = 864 on the A100.
habitat::v1::Kernel MakeKernel(uint32_t blocks, int64_t duration_ns) {
  habitat::v1::Kernel k;
  k.set_name("test_kernel");
  k.mutable_grid()->set_x(blocks);
  k.mutable_grid()->set_y(1);
  k.mutable_grid()->set_z(1);
  k.mutable_block()->set_x(256);
  k.mutable_block()->set_y(1);
  k.mutable_block()->set_z(1);
  k.set_duration_ns(duration_ns);
  return k;
}

TEST(RooflineGammaTest, Eq3OnBothSidesOfTheRidge) {
  EXPECT_DOUBLE_EQ(RooflineGamma(0.0, 10.0), 1.0);
  EXPECT_DOUBLE_EQ(RooflineGamma(5.0, 10.0), 0.75);   // 1 - 0.5 * 5/10
  EXPECT_DOUBLE_EQ(RooflineGamma(10.0, 10.0), 0.5);   // both branches agree
  EXPECT_DOUBLE_EQ(RooflineGamma(20.0, 10.0), 0.25);  // 0.5 * 10/20
  EXPECT_DOUBLE_EQ(RooflineGamma(80.0, 10.0), 0.0625);
}

TEST(KernelGammaTest, FromCounters) {
  const auto a100 = testing::A100();
  auto k = MakeKernel(1000, 100000);
  EXPECT_DOUBLE_EQ(*KernelGamma(k, a100), 1.0);  // no counters
  k.mutable_counters()->set_dram_read_bytes(1000);
  EXPECT_DOUBLE_EQ(*KernelGamma(k, a100), 1.0);  // no FLOPs
  k.mutable_counters()->set_flop_fp32(1000);
  k.mutable_counters()->set_dram_read_bytes(0);
  EXPECT_DOUBLE_EQ(*KernelGamma(k, a100), 0.0);  // FLOPs, no bytes
  // Ridge of the A100: 19.5e12 / 1555e9 = 12.5402 FLOP/byte. x = 25.0804
  // (twice the ridge) -> gamma = 0.5 * R/x = 0.25.
  k.mutable_counters()->set_dram_read_bytes(500000);
  k.mutable_counters()->set_dram_write_bytes(500000);
  k.mutable_counters()->set_flop_fp32(25080386);
  EXPECT_NEAR(*KernelGamma(k, a100), 0.25, 1e-6);
  // Tensor-core FLOPs use the tensor peak: R = 312e12 / 1555e9 = 200.643,
  // x = 25.08 -> gamma = 1 - 0.5 * 25.08/200.64 = 0.9375.
  k.mutable_counters()->set_flop_fp32(0);
  k.mutable_counters()->set_flop_tensor(25080386);
  EXPECT_NEAR(*KernelGamma(k, a100), 0.9375, 1e-6);
}

TEST(PaperWaveScalingTest, MemoryBoundEq2ByHand) {
  // B = 1000: ceil(1000/640) = 2 waves on the V100, ceil(1000/864) = 2 on
  // the A100. gamma = 1 (no counters):
  //   T_d = 2/2 * (900 * 864) / (1555 * 640) * 100000
  //       = 777600 / 995200 * 100000 = 78135.048 -> 78135 ns.
  auto p = PaperWaveScaling(MakeKernel(1000, 100000), testing::V100(), testing::A100());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->predicted_ns, 78135);
  EXPECT_EQ(p->origin_waves, 2);
  EXPECT_EQ(p->target_waves, 2);
  EXPECT_DOUBLE_EQ(p->gamma, 1.0);
  EXPECT_EQ(p->branch, ScalingBranch::kPaperEq2);
}

TEST(PaperWaveScalingTest, PartialWaveQuantization) {
  // B = 700: 2 waves on the V100 (640 per wave), 1 on the A100 (864), so
  // the time halves on top of the per-wave factor:
  //   T_d = 1/2 * 0.78135048 * 100000 = 39067.52 -> 39068 ns.
  auto p = PaperWaveScaling(MakeKernel(700, 100000), testing::V100(), testing::A100());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->predicted_ns, 39068);
  EXPECT_EQ(p->origin_waves, 2);
  EXPECT_EQ(p->target_waves, 1);
}

TEST(PaperWaveScalingTest, MixedGammaByHand) {
  // Counters: 1e6 bytes, 6270096 FP32 FLOPs -> x = 6.270096; R on the
  // target (A100) = 12.540193, so gamma = 1 - 0.5 * x/R = 0.75 (to 2e-8).
  //   T_d = (0.78135048)^0.75 * (1380/1410)^0.25 * 100000
  //       = 0.831060 * 0.994638 * 100000 = 82660.76 -> 82661 ns.
  auto k = MakeKernel(1000, 100000);
  k.mutable_counters()->set_dram_read_bytes(600000);
  k.mutable_counters()->set_dram_write_bytes(400000);
  k.mutable_counters()->set_flop_fp32(6270096);
  auto p = PaperWaveScaling(k, testing::V100(), testing::A100());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->gamma, 0.75, 1e-7);
  EXPECT_EQ(p->predicted_ns, 82661);
}

TEST(PaperWaveScalingTest, RejectsBadKernels) {
  auto k = MakeKernel(1000, 100000);
  k.mutable_grid()->set_x(0);
  auto s = PaperWaveScaling(k, testing::V100(), testing::A100()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("grid.x"));

  k = MakeKernel(1000, 100000);
  k.mutable_block()->set_z(0);
  s = PaperWaveScaling(k, testing::V100(), testing::A100()).status();
  EXPECT_THAT(s.message(), HasSubstr("block.z"));

  s = PaperWaveScaling(MakeKernel(1000, -1), testing::V100(), testing::A100()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("duration_ns"));

  // 64 KiB of shared memory fits a V100 block (96 KiB) but not a P100 one
  // (48 KiB): the target cannot run the kernel.
  k = MakeKernel(1000, 100000);
  k.set_dynamic_shared_memory_bytes(65536);
  s = PaperWaveScaling(k, testing::V100(), testing::P100()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_shared_memory_per_block_bytes"));

  auto broken = testing::A100();
  broken.set_memory_bandwidth_gbps(0);
  s = PaperWaveScaling(MakeKernel(1000, 100000), testing::V100(), broken).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("memory_bandwidth_gbps"));
}

TEST(ScaleKernelTest, DefaultsMatchEq2ExceptTheFixedPart) {
  // With no measured constants (kernel basis) both GPUs get the same
  // efficiency, so only the bandwidth ratio remains, and the default fixed
  // part (1350 ns) stays unscaled. B = 17280 = 27 V100 waves = 20 A100 waves,
  // so Eq. 2's wave factor is (20/27) * (864/640) = 1:
  //   Eq. 2:  100000 * 900/1555 = 57877.81 -> 57878
  //   ours:   1350 + (100000 - 1350) * 900/1555 = 58446.46 -> 58446
  auto k = MakeKernel(17280, 100000);
  auto ours = ScaleKernel(k, testing::V100(), testing::A100());
  auto paper = PaperWaveScaling(k, testing::V100(), testing::A100());
  ASSERT_TRUE(ours.ok()) << ours.status();
  ASSERT_TRUE(paper.ok()) << paper.status();
  EXPECT_EQ(ours->predicted_ns, 58446);
  EXPECT_EQ(paper->predicted_ns, 57878);
  EXPECT_EQ(ours->origin_waves, 27);
  EXPECT_EQ(ours->target_waves, 20);
  EXPECT_EQ(ours->branch, ScalingBranch::kWorkScaled);
}

TEST(ScaleKernelTest, KernelShorterThanFixedPart) {
  // A 1000 ns kernel is all fixed part: work 0, the target's fixed part
  // (default 1350 ns) is the prediction.
  auto p = ScaleKernel(MakeKernel(10, 1000), testing::V100(), testing::A100());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->predicted_ns, 1350);
}

TEST(ScaleKernelTest, FixedPartIsNotScaled) {
  // work_o = 50000 - 2000 = 48000; * 800/1400 = 27428.57; + 3000 fixed on
  // the target = 30428.57 -> 30429 ns.
  auto o = testing::V100();
  o.set_streaming_bandwidth_gbps(800);
  o.set_kernel_fixed_latency_ns(2000);
  auto d = testing::A100();
  d.set_streaming_bandwidth_gbps(1400);
  d.set_kernel_fixed_latency_ns(3000);
  auto p = ScaleKernel(MakeKernel(100000, 50000), o, d);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->predicted_ns, 30429);
  EXPECT_EQ(p->branch, ScalingBranch::kWorkScaled);
}

// Host-timed constants for the next tests: a fast GPU (S 1400 GB/s, fixed
// 15 us, floor 26 us) and a slow one (S 800 or 150, fixed 20 or 15 us,
// floor 30 us).
struct HostPair {
  habitat::v1::DeviceSpec fast = testing::A100();
  habitat::v1::DeviceSpec slow = testing::V100();
  HostPair(double slow_bandwidth, int64_t slow_fixed) {
    fast.set_streaming_bandwidth_gbps(1400);
    fast.set_op_fixed_latency_ns(15000);
    fast.set_op_latency_floor_ns(26000);
    slow.set_streaming_bandwidth_gbps(slow_bandwidth);
    slow.set_op_fixed_latency_ns(slow_fixed);
    slow.set_op_latency_floor_ns(30000);
  }
};
ScalingOptions HostTimedOptions() {
  ScalingOptions options;
  options.basis = TimeBasis::kHostTimedOp;
  return options;
}
const ScalingOptions kHostTimed = HostTimedOptions();

TEST(ScaleKernelTest, HostFloorCarriesOverScaled) {
  // T_o = 26500 on the fast GPU, 1.2 MB of DRAM traffic: work_o = 11500 but
  // the bytes explain 1.2e6 / 1400e9 s = 857 ns, and 26500 < 2 * 26000, so
  // the origin is on its floor. floor_d = 26500 * 30000/26000 = 30576.9;
  // the work, 857 * 1400/800 = 1500, + 20000 = 21500 is below it.
  HostPair g(800, 20000);
  auto k = MakeKernel(100, 26500);
  k.mutable_counters()->set_dram_read_bytes(800000);
  k.mutable_counters()->set_dram_write_bytes(400000);
  auto p = ScaleKernel(k, g.fast, g.slow, kHostTimed);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->predicted_ns, 30577);
  EXPECT_EQ(p->branch, ScalingBranch::kTargetFloor);
}

TEST(ScaleKernelTest, HiddenWorkRebuiltFromCounters) {
  // T_o = 27000, 12 MB: bytes explain 8571.4 ns, work_o = 12000 > 1.25x
  // that, so the origin is on its floor and its work is taken as 8571.4.
  // On a 150 GB/s GPU: 8571.4 * 1400/150 = 80000, + 15000 = 95000 ns, above
  // the carried floor 27000 * 30000/26000 = 31154.
  HostPair g(150, 15000);
  auto k = MakeKernel(100, 27000);
  k.mutable_counters()->set_dram_read_bytes(8000000);
  k.mutable_counters()->set_dram_write_bytes(4000000);
  auto p = ScaleKernel(k, g.fast, g.slow, kHostTimed);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->predicted_ns, 95000);
  EXPECT_EQ(p->branch, ScalingBranch::kWorkFromCounters);
}

TEST(ScaleKernelTest, HostTimedWorkBoundOrigin) {
  // T_o = 100000, 120 MB -> 85714 ns explained, work_o = 85000: not on the
  // floor. 85000 * 1400/800 = 148750, + 20000 = 168750 ns.
  HostPair g(800, 20000);
  auto k = MakeKernel(100000, 100000);
  k.mutable_counters()->set_dram_read_bytes(80000000);
  k.mutable_counters()->set_dram_write_bytes(40000000);
  auto p = ScaleKernel(k, g.fast, g.slow, kHostTimed);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->predicted_ns, 168750);
  EXPECT_EQ(p->branch, ScalingBranch::kWorkScaled);
}

TEST(ScaleKernelTest, HostTimedWithoutCountersNearFloorKeepsFloor) {
  // No counters and T_o = 27000 <= 1.1 * 26000: the work is unknown and
  // below the floor; the prediction is the carried floor 31153.8 -> 31154.
  HostPair g(800, 20000);
  auto p = ScaleKernel(MakeKernel(100, 27000), g.fast, g.slow, kHostTimed);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->predicted_ns, 31154);
  EXPECT_EQ(p->branch, ScalingBranch::kTargetFloor);
}

TEST(ScaleKernelTest, ComputeShareIsWaveQuantized) {
  // gamma = 0 (FLOPs, no bytes): work scales with waves and clock only.
  // B = 700: 2 waves on the V100, 1 on the A100. Fixed parts of 1 ns (0
  // would mean "unmeasured" and bring in the default):
  //   1 + (100000 - 1) * (1/2) * 1380/1410 = 48936.68 -> 48937 ns.
  auto k = MakeKernel(700, 100000);
  k.mutable_counters()->set_flop_fp32(1000000);
  auto o = testing::V100();
  auto d = testing::A100();
  o.set_kernel_fixed_latency_ns(1);
  d.set_kernel_fixed_latency_ns(1);
  auto p = ScaleKernel(k, o, d);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->gamma, 0.0);
  EXPECT_EQ(p->predicted_ns, 48937);
}

TEST(ScaleKernelTest, ComputeShareFollowsTheSustainedClock) {
  // As above, with the target holding 1551 MHz under load (1.1x its
  // boost): 1 + 99999 * (1/2) * 1380/1551 = 44487.98 -> 44488 ns. The
  // paper's Eq. 2 keeps the boost clocks.
  auto k = MakeKernel(700, 100000);
  k.mutable_counters()->set_flop_fp32(1000000);
  auto o = testing::V100();
  auto d = testing::A100();
  o.set_kernel_fixed_latency_ns(1);
  d.set_kernel_fixed_latency_ns(1);
  d.set_sustained_clock_mhz(1551);
  auto p = ScaleKernel(k, o, d);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->predicted_ns, 44488);
  auto paper = PaperWaveScaling(k, o, d);
  ASSERT_TRUE(paper.ok()) << paper.status();
  EXPECT_EQ(paper->predicted_ns, std::llround(0.5 * 100000 * 1380.0 / 1410.0));
}

TEST(ScaleKernelTest, GammaFromAchievedBandwidth) {
  // 640 blocks: one wave on both GPUs. work_o = 100000 ns; 40 MB at the
  // origin's 800 GB/s take 50000 ns, so half of the work is memory-bound:
  //   1 + 100000 * (800/1600)^0.5 * (1380/1410)^0.5 = 69955.4 -> 69955 ns.
  auto k = MakeKernel(640, 100001);
  k.mutable_counters()->set_dram_read_bytes(30000000);
  k.mutable_counters()->set_dram_write_bytes(10000000);
  auto o = testing::V100();
  auto d = testing::A100();
  o.set_kernel_fixed_latency_ns(1);
  d.set_kernel_fixed_latency_ns(1);
  o.set_streaming_bandwidth_gbps(800);
  d.set_streaming_bandwidth_gbps(1600);
  auto p = ScaleKernel(k, o, d);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->gamma, 0.5);
  EXPECT_EQ(p->predicted_ns, 69955);
  // The same bytes estimated by the caller for a kernel without counters.
  auto uncounted = MakeKernel(640, 100001);
  ScalingOptions estimated;
  estimated.estimated_dram_bytes = 40000000;
  p = ScaleKernel(uncounted, o, d, estimated);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->gamma, 0.5);
  EXPECT_EQ(p->predicted_ns, 69955);
  // Eq. 3 instead: bytes but no FLOPs -> gamma 1, all work at 800/1600.
  ScalingOptions eq3;
  eq3.gamma_from_achieved_bandwidth = false;
  p = ScaleKernel(k, o, d, eq3);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->gamma, 1.0);
  EXPECT_EQ(p->predicted_ns, 50001);
  // More bytes than the time could stream (L2 hits counted, or a faster
  // kernel than the fitted line): capped at fully memory-bound.
  k.mutable_counters()->set_dram_read_bytes(300000000);
  p = ScaleKernel(k, o, d);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->gamma, 1.0);
}

TEST(ScaleKernelTest, RejectsBadInput) {
  auto s = ScaleKernel(MakeKernel(0, 100), testing::V100(), testing::A100()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("grid.x"));
  s = ScaleKernel(MakeKernel(10, -5), testing::V100(), testing::A100()).status();
  EXPECT_THAT(s.message(), HasSubstr("duration_ns"));
  auto bad = testing::A100();
  bad.set_op_latency_floor_ns(-1);
  s = ScaleKernel(MakeKernel(10, 100), testing::V100(), bad, kHostTimed).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("op_latency_floor_ns"));
}

TEST(ResolveScalingConstantsTest, Defaults) {
  auto v100 = testing::V100();
  auto c = ResolveScalingConstants(v100, TimeBasis::kHostTimedOp);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->streaming_bandwidth_is_default);
  EXPECT_DOUBLE_EQ(c->streaming_bandwidth_gbps, 900 * kDefaultStreamingEfficiency);
  EXPECT_EQ(c->fixed_ns, kDefaultOpFixedLatencyNs);
  EXPECT_EQ(c->floor_ns, kDefaultOpLatencyFloorNs);
  v100.set_measured_memory_bandwidth_gbps(830);
  c = ResolveScalingConstants(v100, TimeBasis::kKernelDuration);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->streaming_bandwidth_gbps, 830);
  EXPECT_EQ(c->fixed_ns, kDefaultKernelFixedLatencyNs);
  EXPECT_TRUE(c->fixed_is_default);
  EXPECT_EQ(c->floor_ns, 0);
  v100.set_kernel_fixed_latency_ns(2000);
  c = ResolveScalingConstants(v100, TimeBasis::kKernelDuration);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->fixed_ns, 2000);
  EXPECT_FALSE(c->fixed_is_default);
}

}  // namespace
}  // namespace habitat
