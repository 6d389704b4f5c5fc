// The ring all-gather and reduce-scatter that sharded data parallelism
// runs (allreduce.h), computed by hand on round link constants.
#include <cstdint>

#include "core/parallel/allreduce.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

// 1 GB at 100 GB/s is 10 ms.
constexpr int64_t kGB = 1'000'000'000;
LinkConstants HandLink() {
  LinkConstants link;
  link.intra_node_latency_ns = 1000;
  link.inter_node_latency_ns = 5000;
  link.intra_node_busbw_gbps = 100;
  link.inter_node_gbps_per_gpu = 20;
  return link;
}

int64_t Ns(absl::StatusOr<int64_t> ns) {
  EXPECT_TRUE(ns.ok()) << ns.status();
  return ns.ok() ? *ns : -1;
}

TEST(RingAllGatherTest, SingleNodeByHand) {
  // (n-1)/n * 1e9 B / 100 GB/s + (n-1) * 1 us.
  EXPECT_EQ(Ns(RingAllGatherNs({kGB, 2, 1}, HandLink())), 5'000'000 + 1'000);
  EXPECT_EQ(Ns(RingAllGatherNs({kGB, 4, 1}, HandLink())), 7'500'000 + 3'000);
  EXPECT_EQ(Ns(RingAllGatherNs({kGB, 8, 1}, HandLink())), 8'750'000 + 7'000);
}

TEST(RingAllGatherTest, AcrossNodesTheNetworkCapsTheRing) {
  // 2 nodes x 4: min(100, 4 x 20) = 80 GB/s; 7 steps at the network's 5 us.
  EXPECT_EQ(Ns(RingAllGatherNs({kGB, 4, 2}, HandLink())), 10'937'500 + 35'000);
  EXPECT_EQ(Ns(RingReduceScatterNs({kGB, 4, 2}, HandLink())), 10'937'500 + 35'000);
}

TEST(RingReduceScatterTest, EqualsTheAllGatherAndHalvesTheRingAllReduce) {
  for (int n : {2, 4, 8}) {
    const int64_t gather = Ns(RingAllGatherNs({kGB, n, 1}, HandLink()));
    EXPECT_EQ(Ns(RingReduceScatterNs({kGB, n, 1}, HandLink())), gather) << n;
    // A ring all-reduce is a reduce-scatter followed by an all-gather.
    EXPECT_EQ(Ns(RingAllReduceNs({kGB, n, 1}, HandLink())), 2 * gather) << n;
  }
}

TEST(RingAllGatherTest, OneRankOrNoBytesCostNothing) {
  EXPECT_EQ(Ns(RingAllGatherNs({kGB, 1, 1}, HandLink())), 0);
  EXPECT_EQ(Ns(RingReduceScatterNs({kGB, 1, 1}, HandLink())), 0);
  EXPECT_EQ(Ns(RingAllGatherNs({0, 8, 2}, HandLink())), 0);
  EXPECT_EQ(Ns(RingReduceScatterNs({0, 8, 2}, HandLink())), 0);
}

TEST(RingAllGatherTest, SmallMessagesPayTheFill) {
  LinkConstants link = HandLink();
  link.fill_bytes = kGB / 4;
  // 7.5 ms of transfer plus its quarter (fill / bytes), above the 3 us of
  // hops.
  EXPECT_EQ(Ns(RingAllGatherNs({kGB, 4, 1}, link)), 7'500'000 + 1'875'000);
}

TEST(RingAllGatherTest, InvalidInputsAreRefused) {
  EXPECT_EQ(RingAllGatherNs({kGB, 0, 1}, HandLink()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RingReduceScatterNs({-1, 2, 1}, HandLink()).status().code(),
            absl::StatusCode::kInvalidArgument);
  LinkConstants no_network = HandLink();
  no_network.inter_node_gbps_per_gpu = 0;
  EXPECT_EQ(RingAllGatherNs({kGB, 4, 2}, no_network).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace habitat
