// The FSDP step timeline (fsdp_timeline.h) on hand-computed cases.
#include "core/parallel/fsdp_timeline.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace habitat {
namespace {

// 100 GB/s and no latency: gathering or reducing 2 MB over 2 GPUs moves
// 1 MB each, 10 us.
FsdpConfig TwoGpus() {
  FsdpConfig config;
  config.ranks_per_node = 2;
  config.link.intra_node_busbw_gbps = 100;
  return config;
}

// Three units of 20 us forward and 40 us backward, a 30 us optimizer.
FsdpIteration ThreeUnits(int64_t unit_bytes) {
  FsdpIteration it;
  it.units.assign(3, FsdpUnit{unit_bytes, 20'000, 40'000});
  it.optimizer_ns = 30'000;
  return it;
}

FsdpStepPrediction Predict(const FsdpIteration& it, const FsdpConfig& config) {
  absl::StatusOr<FsdpStepPrediction> p = PredictFsdpStep(it, config);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : FsdpStepPrediction();
}

TEST(FsdpStepTest, PrefetchHidesAllButTheFirstGathersAndTheLastReduce) {
  // Gathers of 10 us under 20 us forwards. Forward: gather 0 [0, 10], unit
  // 0 [10, 30] while gather 1 [10, 20], unit 1 [30, 50] while gather 2
  // [30, 40], unit 2 [50, 70]. Backward: gather 2 [70, 80] exposed, unit 2
  // [80, 120] while gather 1 [80, 90], reduce 2 [120, 130]; unit 1 [120,
  // 160] while gather 0 [130, 140], reduce 1 [160, 170]; unit 0 [160, 200],
  // reduce 0 [200, 210] exposed; optimizer 30 / 2.
  const FsdpStepPrediction p = Predict(ThreeUnits(2'000'000), TwoGpus());
  EXPECT_EQ(p.forward_end_ns, 70'000);
  EXPECT_EQ(p.backward_end_ns, 210'000);
  EXPECT_EQ(p.sharded_optimizer_ns, 15'000);
  EXPECT_EQ(p.step_ns, 225'000);
  EXPECT_EQ(p.compute_ns, 60'000 + 120'000 + 15'000);
  // Without prefetching each gather would wait for the previous unit's
  // compute (+20 us in the forward, +20 in the backward); without overlap
  // every collective (90 us) would add.
  EXPECT_EQ(p.exposed_comm_ns, 30'000);
  EXPECT_EQ(p.all_gather_ns, 6 * 10'000);
  EXPECT_EQ(p.reduce_scatter_ns, 3 * 10'000);
  EXPECT_EQ(p.num_units, 3);
  EXPECT_EQ(p.unsharded_in_flight_bytes, 4'000'000);
}

TEST(FsdpStepTest, CommunicationBoundUnitsWaitForTheStream) {
  // Gathers and reduces of 30 us, longer than a forward (20 us). Forward:
  // gathers [0, 30], [30, 60], [60, 90]; units [30, 50], [60, 80], [90,
  // 110]. Backward: gather 2 [110, 140]; unit 2 [140, 180] while gather 1
  // [140, 170]; reduce 2 [180, 210]; unit 1 [180, 220], gather 0 queued
  // behind reduce 2 [210, 240]; reduce 1 [240, 270]; unit 0 [240, 280];
  // reduce 0 [280, 310].
  const FsdpStepPrediction p = Predict(ThreeUnits(6'000'000), TwoGpus());
  EXPECT_EQ(p.forward_end_ns, 110'000);
  EXPECT_EQ(p.backward_end_ns, 310'000);
  EXPECT_EQ(p.step_ns, 325'000);
  EXPECT_EQ(p.exposed_comm_ns, 130'000);
}

TEST(FsdpStepTest, CopiesRunOnTheComputeStreamAtTheMemoryBandwidth) {
  // 2 MB units, 2 GPUs, 1000 GB/s: a gather's copy-in (2 x 2 MB / 2) and
  // copy-out (2 x 2 MB) move 6 MB, 6 us; the reduce-scatter's copy-in 4 MB,
  // 4 us. Forward units 26 us, backward 40 + 6 + 4 = 50 us.
  FsdpConfig config = TwoGpus();
  config.copy_memory_gbps = 1000;
  const FsdpStepPrediction without = Predict(ThreeUnits(2'000'000), TwoGpus());
  const FsdpStepPrediction p = Predict(ThreeUnits(2'000'000), config);
  EXPECT_EQ(p.copy_ns, 3 * (2 * 6'000 + 4'000));
  EXPECT_EQ(p.compute_ns, without.compute_ns + p.copy_ns);
  EXPECT_EQ(p.step_ns, without.step_ns + p.copy_ns);
}

TEST(FsdpStepTest, CollectivesSlowTheComputeTheyOverlap) {
  // As PrefetchHides...: each forward unit but the last overlaps a 10 us
  // gather; in the backward units 2 and 1 overlap 10 us of gather (and
  // reduce 2's 10 us lies in unit 1's backward). 1.5x: +5 us per 10 us.
  FsdpConfig config = TwoGpus();
  config.compute_slowdown = 1.5;
  const FsdpStepPrediction without = Predict(ThreeUnits(2'000'000), TwoGpus());
  const FsdpStepPrediction p = Predict(ThreeUnits(2'000'000), config);
  EXPECT_GT(p.interference_ns, 0);
  EXPECT_LE(p.interference_ns, (p.all_gather_ns + p.reduce_scatter_ns) / 2);
  EXPECT_EQ(p.compute_ns, without.compute_ns + p.interference_ns);
  EXPECT_GT(p.step_ns, without.step_ns);
  config.compute_slowdown = 0.5;
  EXPECT_FALSE(PredictFsdpStep(ThreeUnits(2'000'000), config).ok());
}

TEST(FsdpStepTest, ASlowHostGatesTheUnitsWorkAndEndsTheStep) {
  // The GPU needs 225 us (PrefetchHides...). A host of 420 us before the
  // optimizer (twice the GPU's 210 us of unit work) plus 20 us of hooks per
  // unit launches the last unit's backward at 480 us; its reduce-scatter
  // (10 us) and the optimizer's half (15 us) follow: 505 us. With no host
  // time the hooks change nothing.
  FsdpIteration it = ThreeUnits(2'000'000);
  FsdpConfig config = TwoGpus();
  config.host_ns_per_unit = 20'000;
  EXPECT_EQ(Predict(it, config).step_ns, 225'000);
  EXPECT_EQ(Predict(it, config).host_wait_ns, 0);
  it.host_ns = 420'000;
  const FsdpStepPrediction gated = Predict(it, config);
  EXPECT_EQ(gated.step_ns, 420'000 + 3 * 20'000 + 10'000 + 15'000);
  // The GPU waited for the host for all but its own 225 us and what the
  // host's pace left the stream to do after it (the last reduce-scatter and
  // the optimizer's half): more than the host-bound share of the step.
  EXPECT_GT(gated.host_wait_ns, gated.step_ns - 225'000 - 25'000);
  EXPECT_LE(gated.host_wait_ns, gated.step_ns - 225'000 + 25'000);
  // The optimizer's own launches (100 us) end the step after its kernels.
  it.host_ns = 520'000;
  it.optimizer_host_ns = 100'000;
  EXPECT_EQ(Predict(it, config).step_ns, 420'000 + 3 * 20'000 + 100'000);
  // A host time no step could have is refused, not summed past int64.
  it.host_ns = int64_t{1} << 62;
  EXPECT_FALSE(PredictFsdpStep(it, config).ok());
  // A fast host leaves the GPU's step, but for the first unit's hook
  // (10 us), which comes before any gather.
  it.host_ns = 21'000;
  it.optimizer_host_ns = 0;
  EXPECT_EQ(Predict(it, config).step_ns, 225'000 + 10'000);
}

TEST(FsdpStepTest, OneGpuIsTheSingleGpuStep) {
  FsdpConfig one;  // 1 x 1, no links needed
  const FsdpStepPrediction p = Predict(ThreeUnits(2'000'000), one);
  EXPECT_EQ(p.step_ns, 60'000 + 120'000 + 30'000);
  EXPECT_EQ(p.exposed_comm_ns, 0);
  EXPECT_EQ(p.all_gather_ns, 0);
  EXPECT_EQ(p.unsharded_in_flight_bytes, 0);
}

TEST(FsdpStepTest, BadInputsAreRefused) {
  FsdpIteration negative = ThreeUnits(2'000'000);
  negative.units[1].backward_ns = -1;
  EXPECT_EQ(PredictFsdpStep(negative, TwoGpus()).status().code(),
            absl::StatusCode::kInvalidArgument);
  FsdpConfig no_link = TwoGpus();
  no_link.link.intra_node_busbw_gbps = 0;
  EXPECT_EQ(PredictFsdpStep(ThreeUnits(1), no_link).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Six backward operations; five parameters: two of op 0 (the last layer of
// the forward), one of op 2, two of op 4.
SingleGpuIteration SixOps() {
  SingleGpuIteration it;
  it.backward_op_ns = {1'000, 2'000, 3'000, 4'000, 5'000, 6'000};
  it.forward_op_ns = {10'000, 20'000, 30'000, 40'000, 50'000, 60'000};
  it.forward_ns = 250'000;  // 40 us outside any operation
  it.params = {{100, 0}, {10, 0}, {100, 2}, {100, 4}, {10, 4}};
  it.optimizer_ns = 7'000;
  return it;
}

TEST(FsdpUnitsTest, EqualBytesInForwardOrderWithoutSplittingALayer) {
  absl::StatusOr<FsdpIteration> two = FsdpUnitsByBytes(SixOps(), 2);
  ASSERT_TRUE(two.ok()) << two.status();
  // Forward order: op 4's 110 bytes, op 2's 100 (210 >= half of 320:
  // closed), op 0's 110.
  ASSERT_EQ(two->units.size(), 2u);
  EXPECT_EQ(two->units[0].bytes, 210);
  EXPECT_EQ(two->units[1].bytes, 110);
  // The first unit's backward: ops 1 to 5 (after op 0, to the end).
  EXPECT_EQ(two->units[0].backward_ns, 20'000);
  EXPECT_EQ(two->units[0].forward_ns, 200'000);
  EXPECT_EQ(two->units[1].backward_ns, 1'000);
  EXPECT_EQ(two->units[1].forward_ns, 10'000);
  EXPECT_EQ(two->tail_forward_ns, 40'000);
  EXPECT_EQ(two->optimizer_ns, 7'000);

  // More units than layers: one per layer.
  absl::StatusOr<FsdpIteration> many = FsdpUnitsByBytes(SixOps(), 10);
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_EQ(many->units.size(), 3u);
  EXPECT_EQ(many->units[0].bytes, 110);
  EXPECT_EQ(many->units[1].bytes, 100);
  EXPECT_EQ(many->units[2].bytes, 110);

  absl::StatusOr<FsdpIteration> one = FsdpUnitsByBytes(SixOps(), 1);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->units.size(), 1u);
  EXPECT_EQ(one->units[0].bytes, 320);
  EXPECT_EQ(one->units[0].backward_ns, 21'000);
  EXPECT_EQ(one->units[0].forward_ns, 210'000);
}

TEST(FsdpUnitsTest, UnitsOfGivenBytesAndARootFoldedFirst) {
  // Forward order: 110, 100, 110 bytes. Units of 110, 100 and 110 bytes
  // asked in another unit (x 1000, as parameter bytes of a model whose
  // gradients the trace holds in fewer) cut at each layer.
  absl::StatusOr<FsdpIteration> three = FsdpUnitsAtBytes(SixOps(), {110'000, 100'000, 110'000});
  ASSERT_TRUE(three.ok()) << three.status();
  ASSERT_EQ(three->units.size(), 3u);
  EXPECT_EQ(three->units[0].bytes, 110);
  EXPECT_EQ(three->units[1].bytes, 100);
  EXPECT_EQ(three->units[2].bytes, 110);
  // The last folded into the first: one root unit gathered first, with
  // both parts' bytes and compute.
  FsdpIteration folded = *three;
  FoldLastUnitIntoFirst(&folded);
  ASSERT_EQ(folded.units.size(), 2u);
  EXPECT_EQ(folded.units[0].bytes, 220);
  EXPECT_EQ(folded.units[0].forward_ns, three->units[0].forward_ns + three->units[2].forward_ns);
  EXPECT_EQ(folded.units[0].backward_ns, three->units[0].backward_ns + three->units[2].backward_ns);
  FoldLastUnitIntoFirst(&folded);  // two units stay two
  EXPECT_EQ(folded.units.size(), 2u);
  // A unit ends at the first layer end at or past its share (192 of 320
  // bytes: after the second layer).
  absl::StatusOr<FsdpIteration> two = FsdpUnitsAtBytes(SixOps(), {6, 4});
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->units.size(), 2u);
  EXPECT_EQ(two->units[0].bytes, 210);
  EXPECT_EQ(FsdpUnitsAtBytes(SixOps(), {0, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FsdpUnitsAtBytes(SixOps(), {5, -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FsdpUnitsTest, BadInputsAreRefused) {
  EXPECT_EQ(FsdpUnitsByBytes(SixOps(), 0).status().code(), absl::StatusCode::kInvalidArgument);
  SingleGpuIteration unindexed = SixOps();
  unindexed.forward_op_ns.pop_back();
  EXPECT_EQ(FsdpUnitsByBytes(unindexed, 2).status().code(), absl::StatusCode::kInvalidArgument);
  SingleGpuIteration none = SixOps();
  none.params.clear();
  EXPECT_EQ(FsdpUnitsByBytes(none, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace habitat
