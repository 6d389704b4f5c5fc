#include "core/parallel/allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;

// Round numbers for hand computation: 1 GB at 100 GB/s is 10 ms.
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

TEST(RingAllReduceTest, SingleNodeByHand) {
  // 2(n-1)/n * 1e9 B / 100 GB/s + 2(n-1) * 1 us.
  EXPECT_EQ(Ns(RingAllReduceNs({kGB, 2, 1}, HandLink())), 10'000'000 + 2'000);
  EXPECT_EQ(Ns(RingAllReduceNs({kGB, 4, 1}, HandLink())), 15'000'000 + 6'000);
  EXPECT_EQ(Ns(RingAllReduceNs({kGB, 8, 1}, HandLink())), 17'500'000 + 14'000);
}

TEST(RingAllReduceTest, BusBandwidthIsTheLinkBandwidthWithoutLatency) {
  LinkConstants link = HandLink();
  link.intra_node_latency_ns = 0;
  for (int n : {2, 4, 8}) {
    const int64_t ns = Ns(RingAllReduceNs({kGB, n, 1}, link));
    EXPECT_NEAR(AllReduceBusBandwidthGbps(kGB, ns, n), 100.0, 1e-6) << n;
  }
}

TEST(RingAllReduceTest, NothingToExchange) {
  EXPECT_EQ(Ns(RingAllReduceNs({kGB, 1, 1}, HandLink())), 0);
  EXPECT_EQ(Ns(RingAllReduceNs({0, 8, 2}, HandLink())), 0);
  EXPECT_EQ(Ns(HierarchicalAllReduceNs({kGB, 1, 1}, HandLink())), 0);
}

TEST(TreeAllReduceTest, ByHand) {
  // 2 * 1e9 / 100 + 2 * 7 chain hops.
  EXPECT_EQ(Ns(TreeAllReduceNs({kGB, 8, 1}, HandLink())), 20'000'000 + 14'000);
  // 2 nodes x 4: min(100, 4 x 20) = 80 GB/s; 2 * 3 intra hops, 2 * 1 inter.
  EXPECT_EQ(Ns(TreeAllReduceNs({kGB, 4, 2}, HandLink())), 25'000'000 + 6'000 + 10'000);
}

TEST(HierarchicalAllReduceTest, TwoNodesByHand) {
  // Reduce-scatter: 3/4 * 1e9 / 100 = 7.5 ms + 3 hops; inter-node ring of
  // 1e9 / 4 per GPU over 2 nodes: 2(1)/2 * 2.5e8 / 20 = 12.5 ms + 2 inter
  // hops; all-gather as the reduce-scatter.
  const int64_t rs = 7'500'000 + 3'000;
  EXPECT_EQ(Ns(HierarchicalAllReduceNs({kGB, 4, 2}, HandLink())), rs + 12'500'000 + 10'000 + rs);
  // The flat ring: 1.75e9 / min(100, 80) + 14 hops at the slower latency.
  EXPECT_EQ(Ns(RingAllReduceNs({kGB, 4, 2}, HandLink())), 21'875'000 + 70'000);
  EXPECT_EQ(Ns(AllReduceNs(AllReduceAlgorithm::kBest, {kGB, 4, 2}, HandLink())),
            21'875'000 + 70'000);
}

TEST(HierarchicalAllReduceTest, WinsWhenTheNetworkIsTheBottleneck) {
  LinkConstants link = HandLink();
  link.inter_node_gbps_per_gpu = 5;  // 20 GB/s per node
  // Ring: 1.75e9 / 20 + 70 us; hierarchical: 15.006 ms + 2.5e8 / 5 + 10 us;
  // tree: 2e9 / 20 + 16 us.
  EXPECT_EQ(Ns(RingAllReduceNs({kGB, 4, 2}, link)), 87'500'000 + 70'000);
  EXPECT_EQ(Ns(TreeAllReduceNs({kGB, 4, 2}, link)), 100'000'000 + 16'000);
  const int64_t hier = 15'006'000 + 50'000'000 + 10'000;
  EXPECT_EQ(Ns(HierarchicalAllReduceNs({kGB, 4, 2}, link)), hier);
  EXPECT_EQ(Ns(AllReduceNs(AllReduceAlgorithm::kBest, {kGB, 4, 2}, link)), hier);
}

TEST(HierarchicalAllReduceTest, OneNodeEqualsTheRing) {
  EXPECT_EQ(Ns(HierarchicalAllReduceNs({kGB, 4, 1}, HandLink())),
            Ns(RingAllReduceNs({kGB, 4, 1}, HandLink())));
}

TEST(BroadcastTest, ByHand) {
  // 1e9 B / 100 GB/s + (n-1) * 1 us inside a node; across 2 nodes of 4 the
  // network caps the chain at 4 * 20 = 80 GB/s and every hop waits 5 us.
  EXPECT_EQ(Ns(BroadcastNs({kGB, 2, 1}, HandLink())), 10'000'000 + 1'000);
  EXPECT_EQ(Ns(BroadcastNs({kGB, 8, 1}, HandLink())), 10'000'000 + 7'000);
  EXPECT_EQ(Ns(BroadcastNs({kGB, 4, 2}, HandLink())), 12'500'000 + 7 * 5'000);
  EXPECT_EQ(Ns(BroadcastNs({kGB, 1, 1}, HandLink())), 0);
  EXPECT_EQ(Ns(BroadcastNs({0, 8, 1}, HandLink())), 0);
  EXPECT_EQ(BroadcastNs({-1, 2, 1}, HandLink()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

LinkConstants NvlsHandLink() {
  LinkConstants link = HandLink();
  link.nvls_algbw_gbps = 80;
  return link;
}

TEST(NvlsAllReduceTest, ByHand) {
  // 1e9 B / 80 GB/s whatever n, + the ring's 2(n-1) hops of 1 us.
  EXPECT_EQ(Ns(NvlsAllReduceNs({kGB, 8, 1}, NvlsHandLink())), 12'500'000 + 14'000);
  EXPECT_EQ(Ns(NvlsAllReduceNs({kGB, 2, 1}, NvlsHandLink())), 12'500'000 + 2'000);
  EXPECT_EQ(Ns(NvlsAllReduceNs({kGB, 1, 1}, NvlsHandLink())), 0);
}

TEST(NvlsAllReduceTest, TheBestOnlyWhereItIsFaster) {
  // 8 GPUs: NVLS 12.514 ms against the ring's 17.514; 2 GPUs: the ring's
  // 10.002 ms against 12.502.
  EXPECT_EQ(Ns(AllReduceNs(AllReduceAlgorithm::kBest, {kGB, 8, 1}, NvlsHandLink())),
            12'500'000 + 14'000);
  EXPECT_EQ(Ns(AllReduceNs(AllReduceAlgorithm::kBest, {kGB, 2, 1}, NvlsHandLink())),
            10'000'000 + 2'000);
  // 4 GPUs: NVLS (12.506 ms) would beat the ring (15.006), but NCCL's NVLS
  // does not below kNvlsMinRanksPerNode GPUs: the ring.
  EXPECT_EQ(Ns(AllReduceNs(AllReduceAlgorithm::kBest, {kGB, 4, 1}, NvlsHandLink())),
            15'000'000 + 6'000);
  EXPECT_EQ(Ns(AllReduceNs(AllReduceAlgorithm::kBest, {kGB, 5, 1}, NvlsHandLink())),
            12'500'000 + 8'000);
  // Across nodes NVLS is not modelled: the best of the others.
  EXPECT_EQ(Ns(AllReduceNs(AllReduceAlgorithm::kBest, {kGB, 4, 2}, NvlsHandLink())),
            Ns(AllReduceNs(AllReduceAlgorithm::kBest, {kGB, 4, 2}, HandLink())));
}

TEST(NvlsAllReduceTest, UnavailableSaysWhy) {
  EXPECT_THAT(NvlsAllReduceNs({kGB, 4, 2}, NvlsHandLink()).status().message(),
              HasSubstr("inside one node"));
  EXPECT_EQ(NvlsAllReduceNs({kGB, 8, 1}, HandLink()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  LinkConstants bad = NvlsHandLink();
  bad.nvls_algbw_gbps = -1;
  EXPECT_THAT(AllReduceNs(AllReduceAlgorithm::kBest, {kGB, 8, 1}, bad).status().message(),
              HasSubstr("nvls_algbw_gbps"));
  bad.nvls_algbw_gbps = std::nan("");
  EXPECT_EQ(RingAllReduceNs({kGB, 8, 1}, bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FillTest, ByHand) {
  LinkConstants link = HandLink();
  link.fill_bytes = 100'000'000;
  // 2 GPUs, 1 GB: T = 10 ms, fill = T x 1e8 / 1e9 = 1 ms (more than 2 hops).
  EXPECT_EQ(Ns(RingAllReduceNs({kGB, 2, 1}, link)), 11'000'000);
  // 10 MB, under the fill size: T = 100 us, fill = T.
  EXPECT_EQ(Ns(RingAllReduceNs({10'000'000, 2, 1}, link)), 200'000);
  // 1 kB: T = 10 ns; the 2 hops (2 us) are the larger.
  EXPECT_EQ(Ns(RingAllReduceNs({1'000, 2, 1}, link)), 2'010);
  // Large messages: busbw = peak x S / (S + fill_bytes).
  EXPECT_NEAR(AllReduceBusBandwidthGbps(kGB, Ns(RingAllReduceNs({kGB, 4, 1}, link)), 4),
              100.0 * 1e9 / 1.1e9, 0.01);
  // Every algorithm pays it: the tree's 2 x 1e9 / 100 = 20 ms + 2 ms.
  EXPECT_EQ(Ns(TreeAllReduceNs({kGB, 2, 1}, link)), 22'000'000);
  EXPECT_EQ(Ns(BroadcastNs({kGB, 2, 1}, link)), 11'000'000);
  link.fill_bytes = -1;
  EXPECT_THAT(RingAllReduceNs({kGB, 2, 1}, link).status().message(), HasSubstr("fill_bytes"));
}

TEST(AllReduceTest, InvalidInputs) {
  const LinkConstants link = HandLink();
  EXPECT_THAT(RingAllReduceNs({kGB, 0, 1}, link).status().message(), HasSubstr("ranks_per_node"));
  EXPECT_THAT(TreeAllReduceNs({kGB, 4, 0}, link).status().message(), HasSubstr("nodes"));
  EXPECT_THAT(HierarchicalAllReduceNs({-1, 4, 1}, link).status().message(), HasSubstr("bytes"));
  LinkConstants bad = link;
  bad.intra_node_busbw_gbps = 0;
  EXPECT_EQ(AllReduceNs(AllReduceAlgorithm::kBest, {kGB, 4, 1}, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = link;
  bad.intra_node_busbw_gbps = -3;
  EXPECT_EQ(RingAllReduceNs({kGB, 4, 1}, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = link;
  bad.inter_node_gbps_per_gpu = 0;
  EXPECT_TRUE(RingAllReduceNs({kGB, 4, 1}, bad).ok());  // one node: unused
  EXPECT_EQ(RingAllReduceNs({kGB, 4, 2}, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = link;
  bad.intra_node_latency_ns = -1;
  EXPECT_EQ(RingAllReduceNs({kGB, 4, 1}, bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// Ring bus bandwidth at large sizes from one NVLink constant: ~20 GB/s
// effective per NVLink (25 GB/s line rate with 128 B payloads; NCCL
// maintainer, https://github.com/NVIDIA/nccl-tests/issues/149) times the
// links per GPU: 18 on H100 (NVLink 4), 12 on A100 (NVLink 3).
LinkConstants NvlinkRing(int links) {
  LinkConstants link;
  link.intra_node_latency_ns = 1000;  // hardly matters at >= 1 GiB
  link.intra_node_busbw_gbps = 20.0 * links;
  return link;
}

double ModelBusBw(int64_t bytes, int ranks, const LinkConstants& link) {
  return AllReduceBusBandwidthGbps(bytes, Ns(RingAllReduceNs({bytes, ranks, 1}, link)), ranks);
}

double RelativeError(double model, double reference) {
  return std::abs(model - reference) / reference;
}

TEST(AllReduceReferenceTest, MeasuredH100AndH200Within15Percent) {
  // Median 1 GiB all-reduce busbw, GB/s, NVLS off (ring/tree), on NVLink 4
  // through NVSwitch, from eval/multi_gpu/results/h100x2_2026-11-26.json.gz,
  // h100x4_2026-11-26.json.gz and h200x4_2026-11-27.json.gz
  // (`allreduce_sweep`; N = 2 on a 4-GPU machine uses two of its GPUs).
  // Smaller sizes are below the constant-bandwidth model (e.g. 285 at
  // 256 MiB on 2 H100s), so only the large size is compared.
  constexpr int64_t kGiB = int64_t{1} << 30;
  struct Case {
    int ranks;
    double busbw;
    const char* what;
  } cases[] = {
      {2, 323.838, "h100x2 fp32"},    {2, 328.087, "h100x2 bf16"},
      {2, 318.681, "h100x4 n2 fp32"}, {2, 326.769, "h100x4 n2 bf16"},
      {4, 345.808, "h100x4 fp32"},    {4, 348.266, "h100x4 bf16"},
      {2, 321.5, "h200x4 n2 fp32"},   {2, 323.527, "h200x4 n2 bf16"},
      {4, 339.878, "h200x4 fp32"},    {4, 341.279, "h200x4 bf16"},
  };
  const LinkConstants nvlink4 = NvlinkRing(18);
  for (const Case& c : cases) {
    const double model = ModelBusBw(kGiB, c.ranks, nvlink4);
    EXPECT_LT(RelativeError(model, c.busbw), 0.15) << c.what << ": model " << model;
  }
}

TEST(AllReduceReferenceTest, PublishedEightGpuNvswitchWithin15Percent) {
  // 8 x H100 SXM, NCCL_ALGO=RING, all-reduce busbw ~370 GB/s ("effective
  // NVLink bandwidth"; NCCL maintainer,
  // https://github.com/NVIDIA/nccl-tests/issues/212) and 365-370 GB/s for
  // 2-4 GB messages on 2 to 8 GPUs (https://github.com/NVIDIA/nccl/issues/1455).
  const LinkConstants h100 = NvlinkRing(18);
  const int64_t four_gib = int64_t{4} << 30;
  EXPECT_LT(RelativeError(ModelBusBw(four_gib, 8, h100), 370.0), 0.15);
  EXPECT_LT(RelativeError(ModelBusBw(four_gib, 8, h100), 365.0), 0.15);
  // 8 x A100-SXM4-80GB (NVSwitch, no NVLink SHARP): ~230 GB/s at 8 GB
  // (https://github.com/NVIDIA/nccl-tests/issues/149), 231.58 GB/s at 8 GiB
  // on Azure ND A100 v4 (https://github.com/Azure/AI-benchmarking-guide/blob/
  // 3bb66cacc25632d8ece36bc1d5128c5ea886a60b/Azure_Results/ND_A100_v4_results.md).
  const LinkConstants a100 = NvlinkRing(12);
  const int64_t eight_gib = int64_t{8} << 30;
  EXPECT_LT(RelativeError(ModelBusBw(eight_gib, 8, a100), 230.0), 0.15);
  EXPECT_LT(RelativeError(ModelBusBw(eight_gib, 8, a100), 231.58), 0.15);
}

// The links as LinksFor (core/predict/ddp_prediction.cc) builds them from
// data/devices.textproto: ring bus bandwidth, NVLS from a full node's bus
// bandwidth, the NVLink ring step, NCCL's fill.
LinkConstants ProductLink(double ring_busbw, double nvls_busbw_at_8) {
  LinkConstants link;
  link.intra_node_latency_ns = 3400;
  link.intra_node_busbw_gbps = ring_busbw;
  link.nvls_algbw_gbps = AllReduceAlgorithmBandwidthGbps(nvls_busbw_at_8, 8);
  link.fill_bytes = kNcclFillBytes;
  return link;
}

double BestBusBw(int64_t bytes, int ranks, const LinkConstants& link) {
  return AllReduceBusBandwidthGbps(
      bytes, Ns(AllReduceNs(AllReduceAlgorithm::kBest, {bytes, ranks, 1}, link)), ranks);
}

constexpr int64_t kMiB = int64_t{1} << 20;

struct SizePoint {
  int64_t mib;
  double busbw;
};

TEST(AllReduceReferenceTest, PublishedSizeCurvesWithin15Percent) {
  // nccl-tests all_reduce_perf, in place, 8 GPUs, from the Azure AI
  // benchmarking guide (docs/multi_gpu.md, section 3 has the links): ND H100
  // v5 and ND H200 v5 (NVLS), ND A100 v4 (no NVLS). Each GPU's large-message
  // entry comes from one of these points (H100: 8 GiB, H200: 8 GiB, A100:
  // 1 GiB); the other sizes check the fill, 16 MiB to 8 GiB (below, NCCL's
  // small-message protocols and launch latency set the time).
  struct Curve {
    const char* what;
    LinkConstants link;
    std::vector<SizePoint> points;
  } curves[] = {
      {"8 x H100 NVLS",
       ProductLink(370, 478.87),
       {{16, 234.45}, {64, 361.78}, {256, 423.38}, {1024, 466.35}, {8192, 478.87}}},
      {"8 x H200 NVLS",
       ProductLink(370, 479.98),
       {{16, 240.41}, {64, 368.11}, {256, 432.24}, {1024, 467.58}, {8192, 479.98}}},
      {"8 x A100-SXM4-80GB",
       ProductLink(228.1, 0),
       {{16, 109.22}, {64, 166.63}, {256, 213.87}, {1024, 228.10}, {8192, 231.58}}},
  };
  for (const Curve& c : curves) {
    LinkConstants constant = c.link;
    constant.fill_bytes = 0;
    double worst = 0, worst_constant = 0;
    for (const SizePoint& p : c.points) {
      const double model = BestBusBw(p.mib * kMiB, 8, c.link);
      EXPECT_LT(RelativeError(model, p.busbw), 0.15)
          << c.what << " at " << p.mib << " MiB: model " << model << ", published " << p.busbw;
      worst = std::max(worst, RelativeError(model, p.busbw));
      worst_constant =
          std::max(worst_constant, RelativeError(BestBusBw(p.mib * kMiB, 8, constant), p.busbw));
    }
    // A constant bandwidth with only the ring's hop latencies is worse (on
    // the A100, +52 % at 16 MiB).
    EXPECT_LT(worst, worst_constant) << c.what;
  }
}

TEST(AllReduceReferenceTest, NvlsPerGpuCountWithin5Percent) {
  // 8 x H100 SXM, 2-4 GB messages, NVLS on: 365-370 GB/s for 2 to 4 GPUs,
  // 420 / 440 / 460 / 480 for 5 / 6 / 7 / 8 (https://github.com/NVIDIA/nccl/
  // issues/1455). The model takes the ring up to 4 GPUs (kNvlsMinRanksPerNode)
  // and NVLS from 5.
  const LinkConstants h100 = ProductLink(370, 478.87);
  const double measured[] = {367.5, 367.5, 367.5, 420, 440, 460, 480};
  for (int n = 2; n <= 8; ++n) {
    const double model = BestBusBw(3 * 1024 * kMiB, n, h100);
    EXPECT_LT(RelativeError(model, measured[n - 2]), 0.05) << n << " GPUs: model " << model;
  }
}

TEST(AllReduceReferenceTest, OtherNvlinkNodesWithin15Percent) {
  // Each entry is one point of a published curve (data/devices.textproto);
  // another point of the same kind of node checks the fill.
  // 8 x V100-SXM2 (hybrid cube-mesh): 135.5 GB/s at 1 GiB (the entry, OCI
  // BM.GPU3.8), 129.14 at 128 MiB on a DGX-1-topology node (a 2019 post).
  const LinkConstants v100 = ProductLink(135.5, 0);
  EXPECT_LT(RelativeError(BestBusBw(1024 * kMiB, 8, v100), 135.5), 0.15);
  EXPECT_LT(RelativeError(BestBusBw(128 * kMiB, 8, v100), 129.14), 0.15);
  // 8 x B200: the entry is 4 x GB200's ring at 8 GiB (679.61, the same
  // NVLink 5); an unlabelled 8 x B200 run reads 738.97 at 4 GiB.
  const LinkConstants b200 = ProductLink(680, 0);
  EXPECT_LT(RelativeError(BestBusBw(8192 * kMiB, 4, b200), 679.61), 0.15);
  EXPECT_LT(RelativeError(BestBusBw(4096 * kMiB, 8, b200), 738.97), 0.15);
}

// PCIe links as LinksFor builds them: the PCIe ring step and no fill.
LinkConstants PcieLink(double busbw) {
  LinkConstants link;
  link.intra_node_latency_ns = 5700;
  link.intra_node_busbw_gbps = busbw;
  return link;
}

TEST(AllReduceReferenceTest, PublishedPcieNodesWithinTheLinksRange) {
  // nccl-tests all_reduce_perf on PCIe 4.0 nodes (docs/multi_gpu.md,
  // section 3). Bare-metal nodes with peer-to-peer are within 15 % of NCCL's
  // own Gen4 x16 figure (24 GB/s), the AWS instance within 15 % of the low
  // end (3.1), and every node lies between the two: the host sets the speed.
  struct Node {
    const char* what;
    int ranks;
    int64_t mib;
    double busbw;
    bool bare_metal_p2p;
  } nodes[] = {
      {"6 x RTX 4090 (tinygrad README)", 6, 32, 24.58, true},
      {"5 x RTX 4090 (tinygrad issue 17)", 5, 32, 24.69, true},
      {"4 x RTX 4090, EPYC 7773X, 256 MiB", 4, 256, 25.72, true},
      {"4 x RTX 4090, EPYC 7773X, 1 GiB", 4, 1024, 25.95, true},
      {"4 x RTX 4090, MC62-G40", 4, 32, 12.69, false},
      {"4 x A10G, AWS, NCCL 2.18.5", 4, 28, 3.10, false},
  };
  const LinkConstants usual = PcieLink(24), low = PcieLink(3.1);
  for (const Node& n : nodes) {
    const double fast = BestBusBw(n.mib * kMiB, n.ranks, usual);
    const double slow = BestBusBw(n.mib * kMiB, n.ranks, low);
    if (n.bare_metal_p2p) {
      EXPECT_LT(RelativeError(fast, n.busbw), 0.15) << n.what << ": " << fast;
    }
    EXPECT_GE(n.busbw, slow * 0.85) << n.what << ": low end " << slow;
    EXPECT_LE(n.busbw, fast * 1.15) << n.what << ": usual " << fast;
  }
  EXPECT_LT(RelativeError(BestBusBw(28 * kMiB, 4, low), 3.10), 0.15);
}

TEST(AllReduceReferenceTest, PublishedCloudNetworksWithinTheRange) {
  // Across nodes the product takes each node's NIC line rate x 0.94, and at
  // the range's low end x 0.66, shared by its 8 GPUs (ddp_prediction.h;
  // docs/multi_gpu.md, section 3, "Across nodes"). Cloud fabrics published:
  struct Cluster {
    const char* what;
    AllReduceAlgorithm algorithm;
    int nodes;
    int64_t mib;
    double node_gbit;  // the node's NICs, Gb/s
    double busbw;
  } clusters[] = {
      {"8 x AWS p5, NVLSTree (the model's best)", AllReduceAlgorithm::kBest, 8, 4096, 3200, 279.78},
      {"2 x GCP a3-highgpu-8g, NCCL_ALGO=Ring", AllReduceAlgorithm::kRing, 2, 2048, 800, 65.72},
  };
  for (const Cluster& c : clusters) {
    LinkConstants usual = ProductLink(370, 0);
    usual.inter_node_latency_ns = 9600;
    usual.inter_node_gbps_per_gpu = c.node_gbit / 8 * 0.94 / 8;
    LinkConstants low = usual;
    low.inter_node_gbps_per_gpu = c.node_gbit / 8 * 0.66 / 8;
    const int64_t bytes = c.mib * kMiB;
    const auto busbw = [&](const LinkConstants& link) {
      return AllReduceBusBandwidthGbps(
          bytes, Ns(AllReduceNs(c.algorithm, {bytes, 8, c.nodes}, link)), 8 * c.nodes);
    };
    const double fast = busbw(usual), slow = busbw(low);
    EXPECT_LT(RelativeError(slow, c.busbw), 0.15) << c.what << ": low end " << slow;
    EXPECT_GT(RelativeError(fast, c.busbw), 0.15) << c.what << ": usual " << fast;
    EXPECT_LE(c.busbw, fast) << c.what;
  }
}

TEST(AllReduceReferenceTest, MeasuredSweepsCloserWithTheFill) {
  // Median busbw, fp32, NVLS off, 16 MiB to 1 GiB, from the lent machines'
  // `allreduce_sweep` (eval/multi_gpu/results/h100x4_2026-11-26.json.gz and
  // h200x4_2026-11-27.json.gz; PyTorch-timed, so each carries a host call of
  // 24-45 us). Two GPUs reach only about 0.87 of the ring entry at 1 GiB,
  // four 0.93, and every run dips at 128 MiB: the fill model is not within
  // 15 % of every point (mean 8-21 % per run, worst +42 % at 128 MiB on 2
  // H200s) but closer than a constant bandwidth (mean 20-46 %; 1.35-1.86x
  // the measured 16 MiB points).
  struct Run {
    const char* what;
    int ranks;
    std::vector<SizePoint> points;
  } runs[] = {
      {"h100 n2",
       2,
       {{16, 184.657},
        {32, 216.408},
        {64, 246.717},
        {128, 250.122},
        {256, 278.008},
        {512, 301.45},
        {1024, 318.681}}},
      {"h100 n4",
       4,
       {{16, 210.783},
        {32, 255.901},
        {64, 286.135},
        {128, 285.521},
        {256, 314.27},
        {512, 335.39},
        {1024, 345.808}}},
      {"h200 n2",
       2,
       {{16, 172.961},
        {32, 213.467},
        {64, 246.633},
        {128, 231.212},
        {256, 270.008},
        {512, 303.347},
        {1024, 321.5}}},
      {"h200 n4",
       4,
       {{16, 171.743},
        {32, 237.149},
        {64, 280.112},
        {128, 266.983},
        {256, 303.854},
        {512, 323.732},
        {1024, 339.878}}},
  };
  LinkConstants ring = ProductLink(370, 0);
  LinkConstants constant = ring;
  constant.fill_bytes = 0;
  for (const Run& r : runs) {
    double fill_error = 0, constant_error = 0;
    for (const SizePoint& p : r.points) {
      const double model = BestBusBw(p.mib * kMiB, r.ranks, ring);
      EXPECT_LT(RelativeError(model, p.busbw), 0.45) << r.what << " " << p.mib << " MiB";
      fill_error += RelativeError(model, p.busbw) / r.points.size();
      constant_error +=
          RelativeError(BestBusBw(p.mib * kMiB, r.ranks, constant), p.busbw) / r.points.size();
    }
    EXPECT_LT(fill_error, 0.25) << r.what;
    EXPECT_LT(fill_error, constant_error / 2) << r.what << ": constant " << constant_error;
  }
}

TEST(AllReduceBusBandwidthTest, NcclTestsConvention) {
  // 1 GB in 10 ms: algbw 100; busbw = algbw * 2(n-1)/n.
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidthGbps(kGB, 10'000'000, 2), 100.0);
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidthGbps(kGB, 10'000'000, 4), 150.0);
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidthGbps(kGB, 10'000'000, 1), 0.0);
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidthGbps(kGB, 0, 4), 0.0);
  // And back: busbw 150 on 4 GPUs is algbw 100.
  EXPECT_DOUBLE_EQ(AllReduceAlgorithmBandwidthGbps(150.0, 4), 100.0);
  EXPECT_DOUBLE_EQ(AllReduceAlgorithmBandwidthGbps(150.0, 1), 0.0);
}

// The ring all-gather and reduce-scatter that sharded data parallelism
// runs, on the same round link constants.
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
