#include "core/parallel/ddp_timeline.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Three parameters, one bucket each (cap 1000 B, every gradient >= it).
// Forward 10 us; backward ops of 1, 2, 3, 4 us; optimizer 5 us; single step
// 25 us. Gradients: 1500 B after op 0, 1500 B after op 1, 1500 B after
// `last_op`.
SingleGpuIteration ThreeBuckets(int last_op) {
  SingleGpuIteration it;
  it.forward_ns = 10'000;
  it.backward_op_ns = {1'000, 2'000, 3'000, 4'000};
  it.params = {{1500, 0}, {1500, 1}, {1500, last_op}};
  it.optimizer_ns = 5'000;
  return it;
}

// Two GPUs in one node at 1 GB/s, no latency: a ring all-reduce of S bytes
// takes 2(1)/2 * S / 1 = S ns.
DdpConfig TwoGpus() {
  DdpConfig config;
  config.ranks_per_node = 2;
  config.link.intra_node_busbw_gbps = 1.0;
  config.algorithm = AllReduceAlgorithm::kRing;
  config.bucket_cap_bytes = 1000;
  return config;
}

DdpStepPrediction Predict(const SingleGpuIteration& it, const DdpConfig& config) {
  absl::StatusOr<DdpStepPrediction> p = PredictDdpStep(it, config);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : DdpStepPrediction{};
}

std::vector<int64_t> Starts(const DdpStepPrediction& p) {
  std::vector<int64_t> out;
  for (const BucketTiming& b : p.buckets) out.push_back(b.start_ns);
  return out;
}
std::vector<int64_t> Ends(const DdpStepPrediction& p) {
  std::vector<int64_t> out;
  for (const BucketTiming& b : p.buckets) out.push_back(b.end_ns);
  return out;
}

TEST(DdpTimelineTest, LastBucketAfterBackwardIsExposed) {
  // Backward 10-20 us: op ends 11, 13, 16, 20 us. Buckets 11-12.5,
  // 13-14.5, 20-21.5 us; step = 21.5 + 5 = 26.5 us.
  const DdpStepPrediction p = Predict(ThreeBuckets(3), TwoGpus());
  EXPECT_EQ(p.num_buckets, 3);
  EXPECT_THAT(Starts(p), ElementsAre(11'000, 13'000, 20'000));
  EXPECT_THAT(Ends(p), ElementsAre(12'500, 14'500, 21'500));
  EXPECT_EQ(p.backward_end_ns, 20'000);
  EXPECT_EQ(p.single_gpu_step_ns, 25'000);
  EXPECT_EQ(p.step_ns, 26'500);
  EXPECT_EQ(p.exposed_comm_ns, 1'500);
  EXPECT_DOUBLE_EQ(p.scaling_efficiency, 25'000.0 / 26'500.0);
}

TEST(DdpTimelineTest, HiddenCommunicationCostsNothing) {
  // Third gradient ready after op 2 (16 us): bucket 16-17.5 us, hidden by
  // op 3 (16-20 us).
  const DdpStepPrediction p = Predict(ThreeBuckets(2), TwoGpus());
  EXPECT_THAT(Ends(p), ElementsAre(12'500, 14'500, 17'500));
  EXPECT_EQ(p.step_ns, 25'000);
  EXPECT_EQ(p.exposed_comm_ns, 0);
  EXPECT_DOUBLE_EQ(p.scaling_efficiency, 1.0);
}

TEST(DdpTimelineTest, BucketsWaitForTheStream) {
  // 4000 B buckets take 4 us: bucket 1 (ready 13 us) waits for bucket 0
  // (11-15 us); bucket 2 (ready 16 us) for bucket 1 (15-19 us).
  SingleGpuIteration it = ThreeBuckets(2);
  for (ParamGradient& p : it.params) p.bytes = 4000;
  const DdpStepPrediction p = Predict(it, TwoGpus());
  EXPECT_THAT(Starts(p), ElementsAre(11'000, 15'000, 19'000));
  EXPECT_THAT(Ends(p), ElementsAre(15'000, 19'000, 23'000));
  EXPECT_EQ(p.step_ns, 23'000 + 5'000);
}

TEST(DdpTimelineTest, InterferenceSlowsBackwardWhileReducing) {
  // Slowdown 1.5. Op 1 (11 us, 2 us of work): 1 us of work in 11-12.5 us
  // beside bucket 0, the rest by 13.5 us. Bucket 1 13.5-15 us; op 2 (3 us):
  // 1 us by 15 us, ends 17 us. Bucket 2 17-18.5 us; op 3 (4 us): 1 us by
  // 18.5 us, ends 21.5 us. Step 21.5 + 5 = 26.5 us.
  DdpConfig config = TwoGpus();
  config.compute_slowdown = 1.5;
  const DdpStepPrediction p = Predict(ThreeBuckets(2), config);
  EXPECT_THAT(Starts(p), ElementsAre(11'000, 13'500, 17'000));
  EXPECT_EQ(p.backward_end_ns, 21'500);
  EXPECT_EQ(p.step_ns, 26'500);
  EXPECT_EQ(p.exposed_comm_ns, 1'500);
}

TEST(DdpTimelineTest, HostTimeAndGradientCopies) {
  // 500 ns per bucket delays each launch; each 1500 B gradient is copied
  // into its bucket after its op (2 x 1500 B at 1 GB/s = 3 us, on the
  // compute stream) and back after the last bucket. Op 0 10-11 us, copy to
  // 14 us, bucket 0 14.5-16 us; op 1 14-16 us, copy to 19 us, bucket 1
  // 19.5-21 us; op 2 19-22 us; op 3 22-26 us, copy to 29 us, bucket 2
  // 29.5-31 us; copies back 9 us; step 31 + 9 + 5 = 45 us.
  DdpConfig config = TwoGpus();
  config.per_bucket_host_ns = 500;
  config.copy_back_memory_gbps = 1.0;
  const DdpStepPrediction p = Predict(ThreeBuckets(3), config);
  EXPECT_THAT(Starts(p), ElementsAre(14'500, 19'500, 29'500));
  EXPECT_EQ(p.backward_end_ns, 29'000);
  EXPECT_EQ(p.copy_in_ns, 9'000);
  EXPECT_EQ(p.copy_back_ns, 9'000);
  EXPECT_EQ(p.step_ns, 45'000);
  EXPECT_EQ(p.exposed_comm_ns, 45'000 - 25'000);
}

TEST(DdpTimelineTest, EachGradientCopyIsAKernel) {
  // As above with 200 ns per copy kernel: each copy 3.2 us. Op 0 ends
  // 11 us, copy to 14.2 us, bucket 0 14.7-16.2 us; op 1 14.2-16.2 us, copy
  // to 19.4 us, bucket 1 19.9-21.4 us; op 2 19.4-22.4 us; op 3 22.4-26.4
  // us, copy to 29.6 us, bucket 2 30.1-31.6 us; copies back 9.6 us; step
  // 31.6 + 9.6 + 5 = 46.2 us.
  DdpConfig config = TwoGpus();
  config.per_bucket_host_ns = 500;
  config.copy_back_memory_gbps = 1.0;
  config.per_copy_kernel_ns = 200;
  const DdpStepPrediction p = Predict(ThreeBuckets(3), config);
  EXPECT_THAT(Starts(p), ElementsAre(14'700, 19'900, 30'100));
  EXPECT_EQ(p.copy_in_ns, 9'600);
  EXPECT_EQ(p.copy_back_ns, 9'600);
  EXPECT_EQ(p.step_ns, 46'200);
  // Without a copy bandwidth there are no copies, kernels or not.
  config.copy_back_memory_gbps = 0;
  EXPECT_EQ(Predict(ThreeBuckets(3), config).copy_in_ns, 0);
  config.per_copy_kernel_ns = -1;
  EXPECT_EQ(PredictDdpStep(ThreeBuckets(3), config).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DdpTimelineTest, BuffersAreBroadcastBeforeTheForward) {
  // 10 buffers, 2000 B: broadcast 2000 B at 1 GB/s = 2 us (no hop latency)
  // plus one 100 ns copy per buffer = 3 us before everything of
  // LastBucketAfterBackwardIsExposed: buckets at 14, 16, 23 us, step
  // 26.5 + 3 = 29.5 us.
  SingleGpuIteration it = ThreeBuckets(3);
  it.buffers = 10;
  it.buffer_bytes = 2000;
  DdpConfig config = TwoGpus();
  config.per_copy_kernel_ns = 100;
  DdpStepPrediction p = Predict(it, config);
  EXPECT_EQ(p.buffer_broadcast_ns, 3'000);
  EXPECT_THAT(Starts(p), ElementsAre(14'000, 16'000, 23'000));
  EXPECT_EQ(p.step_ns, 29'500);
  EXPECT_EQ(p.exposed_comm_ns, 4'500);
  // broadcast_buffers=False: no broadcast.
  config.broadcast_buffers = false;
  p = Predict(it, config);
  EXPECT_EQ(p.buffer_broadcast_ns, 0);
  EXPECT_EQ(p.step_ns, 26'500);
  it.buffers = -1;
  EXPECT_EQ(PredictDdpStep(it, config).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DdpTimelineTest, AbsurdStepsAndBytesAreRefused) {
  // Sums past 1e15 would come near int64's range in the timeline.
  SingleGpuIteration it = ThreeBuckets(3);
  it.backward_op_ns[2] = int64_t{2'000'000'000'000'000};
  EXPECT_EQ(PredictDdpStep(it, TwoGpus()).status().code(), absl::StatusCode::kInvalidArgument);
  it = ThreeBuckets(3);
  it.params[0].bytes = int64_t{1'000'000'000'000'000'000};
  it.buffer_bytes = int64_t{1'000'000'000'000'000'000};
  absl::StatusOr<DdpStepPrediction> p = PredictDdpStep(it, TwoGpus());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("exceed 1e+15"));
}

TEST(DdpTimelineTest, OneGpuIsTheSingleGpuStepExactly) {
  DdpConfig config = TwoGpus();
  config.ranks_per_node = 1;
  config.compute_slowdown = 1.5;
  config.per_bucket_host_ns = 1'000;
  config.copy_back_memory_gbps = 1.0;
  config.per_copy_kernel_ns = 1'000;
  SingleGpuIteration it = ThreeBuckets(3);
  it.buffers = 10;
  it.buffer_bytes = 2000;
  const DdpStepPrediction p = Predict(it, config);
  EXPECT_EQ(p.step_ns, SingleGpuStepNs(it));
  EXPECT_EQ(p.step_ns, 25'000);
  EXPECT_EQ(p.exposed_comm_ns, 0);
  EXPECT_EQ(p.num_buckets, 0);
  EXPECT_DOUBLE_EQ(p.scaling_efficiency, 1.0);
  // No link constants are needed for one GPU.
  DdpConfig bare;
  EXPECT_EQ(Predict(it, bare).step_ns, 25'000);
}

TEST(AssignBucketsTest, ClosesAtTheCapAndOvershootsByOneTensor) {
  // Cap 25: 10+10+10 = 30 closes the first (overshoot 5), 25 the second,
  // 5 is left in the third.
  const std::vector<ParamGradient> params = {{10, 0}, {10, 0}, {10, 1}, {25, 2}, {5, 3}};
  absl::StatusOr<std::vector<Bucket>> b = AssignBuckets(params, 4, 25);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->size(), 3u);
  EXPECT_EQ((*b)[0].bytes, 30);
  EXPECT_THAT((*b)[0].params, ElementsAre(0, 1, 2));
  EXPECT_EQ((*b)[0].last_ready_op, 1);
  EXPECT_EQ((*b)[1].bytes, 25);
  EXPECT_EQ((*b)[2].bytes, 5);
  EXPECT_EQ((*b)[2].last_ready_op, 3);
}

TEST(AssignBucketsTest, FollowsGradientReadyOrderNotDeclarationOrder) {
  // Declared in forward order; the backward readies them in reverse, and
  // two gradients of one op keep the given order.
  const std::vector<ParamGradient> params = {{8, 2}, {8, 1}, {8, 0}, {8, 0}};
  absl::StatusOr<std::vector<Bucket>> b = AssignBuckets(params, 3, 16);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->size(), 2u);
  EXPECT_THAT((*b)[0].params, ElementsAre(2, 3));
  EXPECT_THAT((*b)[1].params, ElementsAre(1, 0));
  EXPECT_EQ((*b)[1].last_ready_op, 2);
}

TEST(AssignBucketsTest, DefaultCapIsDdps25MiB) {
  EXPECT_EQ(kDefaultBucketCapBytes, 25 * 1024 * 1024);
  EXPECT_EQ(DdpConfig().bucket_cap_bytes, 26'214'400);
}

TEST(DdpTimelineTest, InvalidInputs) {
  const SingleGpuIteration it = ThreeBuckets(3);
  DdpConfig config = TwoGpus();
  config.ranks_per_node = 0;
  EXPECT_THAT(PredictDdpStep(it, config).status().message(), HasSubstr("ranks_per_node"));
  config = TwoGpus();
  config.nodes = 0;
  EXPECT_EQ(PredictDdpStep(it, config).status().code(), absl::StatusCode::kInvalidArgument);
  config = TwoGpus();
  config.link.intra_node_busbw_gbps = 0;
  EXPECT_EQ(PredictDdpStep(it, config).status().code(), absl::StatusCode::kInvalidArgument);
  config = TwoGpus();
  config.compute_slowdown = 0.5;
  EXPECT_THAT(PredictDdpStep(it, config).status().message(), HasSubstr("compute_slowdown"));
  config = TwoGpus();
  config.bucket_cap_bytes = 0;
  EXPECT_THAT(PredictDdpStep(it, config).status().message(), HasSubstr("bucket_cap_bytes"));

  SingleGpuIteration bad = it;
  bad.params[1].ready_after_op = 4;
  EXPECT_THAT(PredictDdpStep(bad, TwoGpus()).status().message(), HasSubstr("ready_after_op"));
  bad = it;
  bad.params[0].bytes = -1;
  EXPECT_EQ(PredictDdpStep(bad, TwoGpus()).status().code(), absl::StatusCode::kInvalidArgument);
  bad = it;
  bad.backward_op_ns[2] = -1;
  EXPECT_THAT(PredictDdpStep(bad, TwoGpus()).status().message(), HasSubstr("backward_op_ns[2]"));
}

TEST(DdpTimelineTest, TwoNodesUseTheMultiNodeAllReduce) {
  // 2 nodes x 1 GPU, network 0.5 GB/s per GPU: ring of 1500 B takes
  // 1500 / 0.5 = 3 us. Buckets 11-14, 14-17, 20-23 us.
  DdpConfig config = TwoGpus();
  config.ranks_per_node = 1;
  config.nodes = 2;
  config.link.inter_node_gbps_per_gpu = 0.5;
  const DdpStepPrediction p = Predict(ThreeBuckets(3), config);
  EXPECT_THAT(Ends(p), ElementsAre(14'000, 17'000, 23'000));
  EXPECT_EQ(p.step_ns, 28'000);
}

}  // namespace
}  // namespace habitat
