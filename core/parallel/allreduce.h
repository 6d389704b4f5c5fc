// Time of one NCCL all-reduce of a buffer across the GPUs of a data-parallel
// job, from link constants (docs/multi_gpu.md, section 2, steps 3 and 4),
// and of the all-gather and reduce-scatter that sharded data parallelism
// (FSDP) runs on the same links (docs/multi_gpu.md, "Fully sharded data
// parallel").
//
// Units: bytes, integer nanoseconds, and bandwidths in GB/s with GB = 10^9
// bytes as nccl-tests reports them, so bytes / (GB/s) is nanoseconds.
// Bus bandwidth follows nccl-tests: algbw = bytes / time and, for
// all-reduce, busbw = algbw * 2(n-1)/n.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace habitat {

struct LinkConstants {
  // Latency of one step between two GPUs of a node (one hop of a ring or
  // chain). NCCL's device-side step is microseconds; the 24-38 us latency
  // fitted from PyTorch-timed sweeps is mostly the host call, which the DDP
  // timeline charges per bucket instead.
  int64_t intra_node_latency_ns = 0;
  // Latency of one step that crosses the network between nodes.
  int64_t inter_node_latency_ns = 0;
  // All-reduce bus bandwidth inside one node at large sizes (ring, nccl-tests
  // busbw), GB/s. It is per GPU: what each GPU's links sustain.
  double intra_node_busbw_gbps = 0;
  // Network bandwidth per GPU, GB/s: rail-optimised nodes give each GPU its
  // own NIC, so every GPU of a node crosses the network at once. For nodes
  // with fewer NICs than GPUs pass node bandwidth / GPUs per node. Ignored,
  // and may be 0, when there is one node.
  double inter_node_gbps_per_gpu = 0;
  // NVLink SHARP (NVLS): the NVSwitch reduces in the fabric, so each GPU
  // sends and receives the buffer once: time = bytes / this algorithm
  // bandwidth, GB/s, whatever the number of GPUs. 0: the node has none (or
  // it is disabled). Used inside one node only.
  double nvls_algbw_gbps = 0;
  // A message reaches the bus bandwidth only well above this size: NCCL
  // spreads it over fewer channels and pipeline chunks while it is small,
  // and nccl-tests' bus bandwidth climbs with size (about half the peak at
  // 16 MiB, 0.8 at 64 MiB, 0.9 at 256 MiB). An all-reduce of S bytes takes
  // its transfer time T plus the larger of its hop latency and the fill
  // T x min(1, fill_bytes / S): busbw = peak x S / (S + fill_bytes) for
  // large S. 0: no fill (constant bus bandwidth).
  int64_t fill_bytes = 0;
};

// LinkConstants::fill_bytes for NCCL: the size at which an all-reduce
// reaches half its peak bus bandwidth. The published 8 x H100 NVLS curve
// (Azure ND H100 v5, nccl-tests: 234 of 479 GB/s at 16 MiB;
// docs/multi_gpu.md, section 3) gives 16 MiB; the other published curves
// (8 x H200, 8 x A100) and our 2 and 4 x H100 / H200 sweeps check it
// (allreduce_test.cc).
inline constexpr int64_t kNcclFillBytes = int64_t{16} << 20;

struct AllReduceShape {
  int64_t bytes = 0;
  int ranks_per_node = 1;
  int nodes = 1;
};

enum class AllReduceAlgorithm {
  // One ring over all ranks; across nodes the network caps its bandwidth.
  kRing,
  // NCCL's tree: a chain inside each node, a double binary tree across
  // nodes; not bandwidth-optimal (busbw = 2 x algbw in NCCL's tuning model)
  // but logarithmic in the number of nodes.
  kTree,
  // Reduce-scatter inside the node, all-reduce of 1/n_l of the buffer per
  // GPU across nodes over that GPU's NIC, all-gather inside the node.
  kHierarchical,
  // NVLink SHARP inside one node (LinkConstants::nvls_algbw_gbps); the
  // latency is the ring's hops. Unavailable across nodes or without NVLS.
  kNvls,
  // The lowest of those available, as NCCL picks the fastest algorithm by
  // size; NVLS only from kNvlsMinRanksPerNode GPUs.
  kBest,
};

// Fewest GPUs of a node on which NCCL's NVLS beats its ring: on 8 x H100
// with NVLS on, 2 to 4 GPUs ran at the ring's 365-370 GB/s and 5 to 8 at
// 420-480 (https://github.com/NVIDIA/nccl/issues/1455), where a constant
// NVLS algorithm bandwidth would give 4 GPUs 410.
inline constexpr int kNvlsMinRanksPerNode = 5;

// Whether kBest may take NVLS for `shape` on `link`: one node whose links
// have it, of at least kNvlsMinRanksPerNode GPUs.
bool NvlsEligible(const AllReduceShape& shape, const LinkConstants& link);

// InvalidArgument for ranks_per_node or nodes < 1, negative bytes or
// latencies, non-positive (or non-finite) intra-node bandwidth,
// non-positive inter-node bandwidth when nodes > 1, a negative or
// non-finite NVLS bandwidth and a negative fill size.
absl::Status ValidateAllReduce(const AllReduceShape& shape, const LinkConstants& link);

// Each returns 0 for one rank in all or 0 bytes (nothing to exchange). The
// transfer terms below are T; each adds max(hops, fill) (see fill_bytes).
// 2(N-1)/N * bytes / min(B_intra, n_l * B_nic) + 2(N-1) hops.
absl::StatusOr<int64_t> RingAllReduceNs(const AllReduceShape& shape, const LinkConstants& link);
// 2 * bytes / min(B_intra, n_l * B_nic) + 2(n_l - 1) intra hops
// + 2 ceil(log2 M) inter hops.
absl::StatusOr<int64_t> TreeAllReduceNs(const AllReduceShape& shape, const LinkConstants& link);
// Reduce-scatter + inter-node ring all-reduce of bytes / n_l + all-gather,
// one after another. With one node it equals the ring.
absl::StatusOr<int64_t> HierarchicalAllReduceNs(const AllReduceShape& shape,
                                                const LinkConstants& link);
// bytes / B_nvls + 2(n_l - 1) hops, one node only; FAILED_PRECONDITION
// across nodes or without NVLS.
absl::StatusOr<int64_t> NvlsAllReduceNs(const AllReduceShape& shape, const LinkConstants& link);
absl::StatusOr<int64_t> AllReduceNs(AllReduceAlgorithm algorithm, const AllReduceShape& shape,
                                    const LinkConstants& link);

// NCCL's ring broadcast from one root (DDP's buffer broadcast): a
// pipelined chain in which every byte crosses each link once (nccl-tests:
// busbw = algbw for broadcast), taken at the all-reduce's bus bandwidth:
// bytes / min(B_intra, n_l * B_nic) + (N-1) hops. Same validation and
// zero cases as the all-reduces.
absl::StatusOr<int64_t> BroadcastNs(const AllReduceShape& shape, const LinkConstants& link);

// NCCL's ring all-gather and reduce-scatter of a buffer of `shape.bytes`
// (the unsharded size: the all-gather's output, the reduce-scatter's
// input), each GPU holding or receiving bytes / N: every GPU sends and
// receives (N-1)/N of the buffer (nccl-tests: busbw = algbw x (N-1)/N),
// taken at the all-reduce's bus bandwidth, as NCCL's ring runs at the same
// bus bandwidth for all three:
// (N-1)/N * bytes / min(B_intra, n_l * B_nic) + (N-1) hops, plus the fill
// as the all-reduces have it. NVLS and tree variants are not modelled.
// Same validation and zero cases as the all-reduces.
absl::StatusOr<int64_t> RingAllGatherNs(const AllReduceShape& shape, const LinkConstants& link);
absl::StatusOr<int64_t> RingReduceScatterNs(const AllReduceShape& shape, const LinkConstants& link);

// nccl-tests' all-reduce bus bandwidth of a time, GB/s; 0 for time <= 0 or
// fewer than 2 ranks.
double AllReduceBusBandwidthGbps(int64_t bytes, int64_t time_ns, int total_ranks);
// The algorithm bandwidth behind an all-reduce bus bandwidth on
// `total_ranks` GPUs (busbw x n / (2(n-1))); 0 for fewer than 2 ranks.
double AllReduceAlgorithmBandwidthGbps(double busbw_gbps, int total_ranks);

}  // namespace habitat
