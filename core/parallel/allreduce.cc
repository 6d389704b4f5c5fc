#include "core/parallel/allreduce.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace habitat {
namespace {

bool PositiveFinite(double x) { return std::isfinite(x) && x > 0; }

// Time of moving `bytes` at `gbps` (GB/s = bytes/ns).
double TransferNs(double bytes, double gbps) { return bytes / gbps; }

int CeilLog2(int x) {
  int steps = 0;
  while ((1 << steps) < x) ++steps;
  return steps;
}

// Across nodes every ring (and tree) crosses the network, n_l of them at
// once over the n_l NICs of a node, so the slower of the two fabrics sets
// the per-GPU bandwidth.
double FlatBandwidthGbps(const AllReduceShape& shape, const LinkConstants& link) {
  if (shape.nodes == 1) return link.intra_node_busbw_gbps;
  return std::min(link.intra_node_busbw_gbps, shape.ranks_per_node * link.inter_node_gbps_per_gpu);
}

// A ring step waits for its slowest hop.
int64_t FlatHopLatencyNs(const AllReduceShape& shape, const LinkConstants& link) {
  if (shape.nodes == 1) return link.intra_node_latency_ns;
  return std::max(link.intra_node_latency_ns, link.inter_node_latency_ns);
}

bool NothingToExchange(const AllReduceShape& shape) {
  return shape.bytes == 0 || static_cast<int64_t>(shape.ranks_per_node) * shape.nodes == 1;
}

// Transfer time plus the larger of the hop latency and the pipeline fill: a
// message under fill_bytes moves at half its bandwidth at best, a larger
// one loses the time of fill_bytes.
int64_t Finish(double transfer_ns, int64_t latency_ns, int64_t bytes, const LinkConstants& link) {
  const double fill =
      link.fill_bytes > 0
          ? transfer_ns * std::min(1.0, static_cast<double>(link.fill_bytes) / bytes)
          : 0.0;
  return std::llround(transfer_ns + std::max(static_cast<double>(latency_ns), fill));
}

// Reduce-scatter then all-gather: n-1 steps each, bytes/n per step.
int64_t RingNs(const AllReduceShape& shape, const LinkConstants& link) {
  const int64_t n = static_cast<int64_t>(shape.ranks_per_node) * shape.nodes;
  const double moved = 2.0 * (n - 1) / n * shape.bytes;
  return Finish(TransferNs(moved, FlatBandwidthGbps(shape, link)),
                2 * (n - 1) * FlatHopLatencyNs(shape, link), shape.bytes, link);
}

// Reduce up and broadcast down, pipelined: each GPU sends the buffer twice,
// whatever the number of ranks.
int64_t TreeNs(const AllReduceShape& shape, const LinkConstants& link) {
  const double moved = 2.0 * shape.bytes;
  const int64_t latency = 2 * (shape.ranks_per_node - 1) * link.intra_node_latency_ns +
                          2 * CeilLog2(shape.nodes) * link.inter_node_latency_ns;
  return Finish(TransferNs(moved, FlatBandwidthGbps(shape, link)), latency, shape.bytes, link);
}

bool HasNvls(const AllReduceShape& shape, const LinkConstants& link) {
  return shape.nodes == 1 && link.nvls_algbw_gbps > 0;
}

// Every GPU sends its buffer into the switch and receives the reduced one.
int64_t NvlsNs(const AllReduceShape& shape, const LinkConstants& link) {
  return Finish(TransferNs(static_cast<double>(shape.bytes), link.nvls_algbw_gbps),
                2 * (shape.ranks_per_node - 1) * link.intra_node_latency_ns, shape.bytes, link);
}

int64_t HierarchicalNs(const AllReduceShape& shape, const LinkConstants& link) {
  const int64_t local = shape.ranks_per_node;
  const int64_t nodes = shape.nodes;
  // Reduce-scatter and all-gather inside the node: (n_l-1)/n_l of the buffer
  // each, n_l-1 hops each.
  const double intra_moved = 2.0 * (local - 1) / local * shape.bytes;
  double ns = TransferNs(intra_moved, link.intra_node_busbw_gbps);
  int64_t latency = 2 * (local - 1) * link.intra_node_latency_ns;
  if (nodes > 1) {
    // Each GPU all-reduces its 1/n_l shard with its peers on the other nodes.
    const double shard = static_cast<double>(shape.bytes) / local;
    ns += TransferNs(2.0 * (nodes - 1) / nodes * shard, link.inter_node_gbps_per_gpu);
    latency += 2 * (nodes - 1) * link.inter_node_latency_ns;
  }
  return Finish(ns, latency, shape.bytes, link);
}

// Validates once, then costs the algorithm (kBest: the lowest available).
absl::StatusOr<int64_t> CheckedNs(AllReduceAlgorithm algorithm, const AllReduceShape& shape,
                                  const LinkConstants& link) {
  if (absl::Status s = ValidateAllReduce(shape, link); !s.ok()) return s;
  if (algorithm == AllReduceAlgorithm::kNvls && !HasNvls(shape, link)) {
    return absl::FailedPreconditionError(shape.nodes > 1
                                             ? "NVLS all-reduce is modelled inside one node only"
                                             : "these links have no NVLS (nvls_algbw_gbps is 0)");
  }
  if (NothingToExchange(shape)) return 0;
  switch (algorithm) {
    case AllReduceAlgorithm::kRing:
      return RingNs(shape, link);
    case AllReduceAlgorithm::kTree:
      return TreeNs(shape, link);
    case AllReduceAlgorithm::kHierarchical:
      return HierarchicalNs(shape, link);
    case AllReduceAlgorithm::kNvls:
      return NvlsNs(shape, link);
    case AllReduceAlgorithm::kBest:
      break;
  }
  int64_t best = std::min({RingNs(shape, link), TreeNs(shape, link), HierarchicalNs(shape, link)});
  if (NvlsEligible(shape, link)) best = std::min(best, NvlsNs(shape, link));
  return best;
}

}  // namespace

bool NvlsEligible(const AllReduceShape& shape, const LinkConstants& link) {
  return HasNvls(shape, link) && shape.ranks_per_node >= kNvlsMinRanksPerNode;
}

absl::Status ValidateAllReduce(const AllReduceShape& shape, const LinkConstants& link) {
  if (shape.ranks_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ranks_per_node must be >= 1, got ", shape.ranks_per_node));
  }
  if (shape.nodes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("nodes must be >= 1, got ", shape.nodes));
  }
  if (shape.bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("bytes must be >= 0, got ", shape.bytes));
  }
  if (link.intra_node_latency_ns < 0 || link.inter_node_latency_ns < 0) {
    return absl::InvalidArgumentError("link latencies must be >= 0");
  }
  if (!PositiveFinite(link.intra_node_busbw_gbps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("intra_node_busbw_gbps must be > 0, got ", link.intra_node_busbw_gbps));
  }
  if (!std::isfinite(link.nvls_algbw_gbps) || link.nvls_algbw_gbps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("nvls_algbw_gbps must be >= 0, got ", link.nvls_algbw_gbps));
  }
  if (link.fill_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fill_bytes must be >= 0, got ", link.fill_bytes));
  }
  if (shape.nodes > 1 && !PositiveFinite(link.inter_node_gbps_per_gpu)) {
    return absl::InvalidArgumentError(absl::StrCat("inter_node_gbps_per_gpu must be > 0 with ",
                                                   shape.nodes, " nodes, got ",
                                                   link.inter_node_gbps_per_gpu));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> RingAllReduceNs(const AllReduceShape& shape, const LinkConstants& link) {
  return CheckedNs(AllReduceAlgorithm::kRing, shape, link);
}

absl::StatusOr<int64_t> TreeAllReduceNs(const AllReduceShape& shape, const LinkConstants& link) {
  return CheckedNs(AllReduceAlgorithm::kTree, shape, link);
}

absl::StatusOr<int64_t> HierarchicalAllReduceNs(const AllReduceShape& shape,
                                                const LinkConstants& link) {
  return CheckedNs(AllReduceAlgorithm::kHierarchical, shape, link);
}

absl::StatusOr<int64_t> NvlsAllReduceNs(const AllReduceShape& shape, const LinkConstants& link) {
  return CheckedNs(AllReduceAlgorithm::kNvls, shape, link);
}

absl::StatusOr<int64_t> AllReduceNs(AllReduceAlgorithm algorithm, const AllReduceShape& shape,
                                    const LinkConstants& link) {
  return CheckedNs(algorithm, shape, link);
}

absl::StatusOr<int64_t> BroadcastNs(const AllReduceShape& shape, const LinkConstants& link) {
  if (absl::Status s = ValidateAllReduce(shape, link); !s.ok()) return s;
  if (NothingToExchange(shape)) return 0;
  const int64_t n = static_cast<int64_t>(shape.ranks_per_node) * shape.nodes;
  return Finish(TransferNs(static_cast<double>(shape.bytes), FlatBandwidthGbps(shape, link)),
                (n - 1) * FlatHopLatencyNs(shape, link), shape.bytes, link);
}

namespace {

// One pass of the ring: each GPU's share moves N-1 steps, (N-1)/N of the
// buffer through every GPU. All-gather and reduce-scatter are the two
// halves of the ring all-reduce.
absl::StatusOr<int64_t> RingHalfNs(const AllReduceShape& shape, const LinkConstants& link) {
  if (absl::Status s = ValidateAllReduce(shape, link); !s.ok()) return s;
  if (NothingToExchange(shape)) return 0;
  const int64_t n = static_cast<int64_t>(shape.ranks_per_node) * shape.nodes;
  const double moved = static_cast<double>(n - 1) / n * shape.bytes;
  return Finish(TransferNs(moved, FlatBandwidthGbps(shape, link)),
                (n - 1) * FlatHopLatencyNs(shape, link), shape.bytes, link);
}

}  // namespace

absl::StatusOr<int64_t> RingAllGatherNs(const AllReduceShape& shape, const LinkConstants& link) {
  return RingHalfNs(shape, link);
}

absl::StatusOr<int64_t> RingReduceScatterNs(const AllReduceShape& shape,
                                            const LinkConstants& link) {
  return RingHalfNs(shape, link);
}

double AllReduceBusBandwidthGbps(int64_t bytes, int64_t time_ns, int total_ranks) {
  if (time_ns <= 0 || total_ranks < 2) return 0;
  const double algbw = static_cast<double>(bytes) / time_ns;
  return algbw * 2.0 * (total_ranks - 1) / total_ranks;
}

double AllReduceAlgorithmBandwidthGbps(double busbw_gbps, int total_ranks) {
  if (total_ranks < 2) return 0;
  return busbw_gbps * total_ranks / (2.0 * (total_ranks - 1));
}

}  // namespace habitat
