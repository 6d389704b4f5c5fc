#include "core/parallel/fsdp_timeline.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace habitat {
namespace {

// Keeps every sum of the timeline far inside int64, as the DDP timeline
// does.
constexpr double kMaxIterationTotal = 1e15;

absl::Status ValidateUnitInput(const SingleGpuIteration& iteration, int num_units) {
  if (num_units < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_units must be >= 1, got ", num_units));
  }
  if (iteration.params.empty()) {
    return absl::InvalidArgumentError("FSDP units need parameters; the iteration has none");
  }
  if (iteration.forward_op_ns.size() != iteration.backward_op_ns.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward_op_ns has ", iteration.forward_op_ns.size(),
                     " entries where backward_op_ns has ", iteration.backward_op_ns.size()));
  }
  const int ops = static_cast<int>(iteration.backward_op_ns.size());
  for (size_t i = 0; i < iteration.params.size(); ++i) {
    const ParamGradient& g = iteration.params[i];
    if (g.bytes < 0 || g.ready_after_op < 0 || g.ready_after_op >= ops) {
      return absl::InvalidArgumentError(absl::StrCat("params[", i, "] has bytes ", g.bytes,
                                                     " and ready_after_op ", g.ready_after_op, " (",
                                                     ops, " backward operations)"));
    }
  }
  return absl::OkStatus();
}

// Parameter indices in forward order: the reverse of gradient-ready order.
std::vector<int> ForwardOrder(const std::vector<ParamGradient>& params) {
  std::vector<int> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&params](int a, int b) {
    return params[a].ready_after_op < params[b].ready_after_op;
  });
  std::reverse(order.begin(), order.end());
  return order;
}

absl::Status ValidateStepInput(const FsdpIteration& iteration, const FsdpConfig& config) {
  if (config.ranks_per_node < 1 || config.nodes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ranks_per_node and nodes must be >= 1, got ",
                                                   config.ranks_per_node, " and ", config.nodes));
  }
  if (config.ranks_per_node * static_cast<int64_t>(config.nodes) > 1) {
    absl::Status s = ValidateAllReduce({0, config.ranks_per_node, config.nodes}, config.link);
    if (!s.ok()) return s;
  }
  if (!std::isfinite(config.copy_memory_gbps) || config.copy_memory_gbps < 0 ||
      !std::isfinite(config.compute_slowdown) || config.compute_slowdown < 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy_memory_gbps must be >= 0 and compute_slowdown >= 1, got ",
                     config.copy_memory_gbps, " and ", config.compute_slowdown));
  }
  if (iteration.tail_forward_ns < 0 || iteration.optimizer_ns < 0 || iteration.host_ns < 0 ||
      iteration.optimizer_host_ns < 0 || config.host_ns_per_unit < 0) {
    return absl::InvalidArgumentError(
        "tail_forward_ns, optimizer_ns, host_ns, optimizer_host_ns and host_ns_per_unit must be "
        ">= 0");
  }
  // The host's time runs beside the GPU's; each unit adds two hooks.
  double ns = static_cast<double>(iteration.tail_forward_ns) + iteration.optimizer_ns +
              static_cast<double>(iteration.host_ns) + iteration.optimizer_host_ns +
              static_cast<double>(config.host_ns_per_unit) * iteration.units.size();
  double bytes = 0;
  for (size_t u = 0; u < iteration.units.size(); ++u) {
    const FsdpUnit& unit = iteration.units[u];
    if (unit.bytes < 0 || unit.forward_ns < 0 || unit.backward_ns < 0) {
      return absl::InvalidArgumentError(absl::StrCat("units[", u, "] has a negative field"));
    }
    ns += static_cast<double>(unit.forward_ns) + unit.backward_ns;
    bytes += static_cast<double>(unit.bytes);
  }
  if (ns > kMaxIterationTotal || bytes > kMaxIterationTotal) {
    return absl::InvalidArgumentError(absl::StrCat("the iteration's time (", ns,
                                                   " ns) or parameter bytes (", bytes, ") exceed ",
                                                   kMaxIterationTotal));
  }
  return absl::OkStatus();
}

// The one NCCL stream: a collective issued at `issue_ns` starts once the
// stream is free and returns its end.
struct CommStream {
  int64_t free_ns = 0;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [start, end), in order
  size_t first_open = 0;

  int64_t Run(int64_t issue_ns, int64_t ns) {
    const int64_t start = std::max(free_ns, issue_ns);
    free_ns = start + ns;
    if (ns > 0) busy.emplace_back(start, free_ns);
    return free_ns;
  }
  // How long the stream is busy within [from, to). `from` never decreases
  // from one call to the next (the compute stream's starts), so intervals
  // over before it are not looked at again.
  int64_t BusyWithin(int64_t from, int64_t to) {
    while (first_open < busy.size() && busy[first_open].second <= from) ++first_open;
    int64_t sum = 0;
    for (size_t i = first_open; i < busy.size() && busy[i].first < to; ++i) {
      sum += std::max<int64_t>(0, std::min(to, busy[i].second) - std::max(from, busy[i].first));
    }
    return sum;
  }
};

// Bytes over `gbps` GB/s, in ns (0 without a bandwidth).
int64_t CopyNs(double bytes, double gbps) {
  return gbps > 0 ? static_cast<int64_t>(std::llround(bytes / gbps)) : 0;
}

}  // namespace

absl::StatusOr<FsdpIteration> FsdpUnitsByBytes(const SingleGpuIteration& iteration, int num_units) {
  if (absl::Status s = ValidateUnitInput(iteration, num_units); !s.ok()) return s;
  return FsdpUnitsAtBytes(iteration, std::vector<int64_t>(static_cast<size_t>(num_units), 1));
}

absl::StatusOr<FsdpIteration> FsdpUnitsAtBytes(const SingleGpuIteration& iteration,
                                               const std::vector<int64_t>& unit_bytes) {
  const int num_units = static_cast<int>(unit_bytes.size());
  if (absl::Status s = ValidateUnitInput(iteration, num_units); !s.ok()) return s;
  // Where each unit ends, as a share of all the parameter bytes.
  std::vector<double> ends;
  double asked = 0;
  for (int64_t b : unit_bytes) {
    if (b < 0) return absl::InvalidArgumentError("unit_bytes must be >= 0");
    asked += static_cast<double>(b);
    ends.push_back(asked);
  }
  if (!(asked > 0)) return absl::InvalidArgumentError("unit_bytes must hold some bytes");
  const std::vector<ParamGradient>& params = iteration.params;
  const std::vector<int> order = ForwardOrder(params);
  const double total = std::accumulate(
      params.begin(), params.end(), 0.0,
      [](double sum, const ParamGradient& g) { return sum + static_cast<double>(g.bytes); });
  FsdpIteration out;
  // Per unit in forward order, the latest backward operation among its
  // gradients': its first parameter's, as ready order is reversed.
  std::vector<int> last_ready;
  bool open = false;
  double cumulative = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const ParamGradient& g = params[order[i]];
    if (!open) {
      out.units.emplace_back();
      last_ready.push_back(g.ready_after_op);
      open = true;
    }
    out.units.back().bytes += g.bytes;
    cumulative += static_cast<double>(g.bytes);
    const bool layer_ends =
        i + 1 == order.size() || params[order[i + 1]].ready_after_op != g.ready_after_op;
    // A unit's share of the gradients' bytes, less a rounding's worth: the
    // units asked for may be the parameters' bytes in another unit.
    const double target = total * ends[out.units.size() - 1] / asked * (1 - 1e-9);
    if (layer_ends && static_cast<int>(out.units.size()) < num_units && cumulative >= target) {
      open = false;
    }
  }
  // Unit u's backward operations: (last_ready[u + 1], last_ready[u]]; the
  // first unit's reach the end of the backward.
  const int num_ops = static_cast<int>(iteration.backward_op_ns.size());
  int64_t unit_forward = 0;
  for (size_t u = 0; u < out.units.size(); ++u) {
    const int hi = u == 0 ? num_ops - 1 : last_ready[u];
    const int lo = u + 1 < out.units.size() ? last_ready[u + 1] + 1 : 0;
    for (int op = lo; op <= hi; ++op) {
      out.units[u].backward_ns += iteration.backward_op_ns[op];
      out.units[u].forward_ns += iteration.forward_op_ns[op];
    }
    unit_forward += out.units[u].forward_ns;
  }
  out.tail_forward_ns = std::max<int64_t>(0, iteration.forward_ns - unit_forward);
  out.optimizer_ns = iteration.optimizer_ns;
  out.host_ns = iteration.host_ns;
  out.optimizer_host_ns = iteration.optimizer_host_ns;
  return out;
}

void FoldLastUnitIntoFirst(FsdpIteration* iteration) {
  std::vector<FsdpUnit>& units = iteration->units;
  if (units.size() < 3) return;
  units.front().bytes += units.back().bytes;
  units.front().forward_ns += units.back().forward_ns;
  units.front().backward_ns += units.back().backward_ns;
  units.pop_back();
}

namespace {

// Per unit: its all-gather and reduce-scatter, and FSDP2's copies on the
// compute stream around them (FsdpConfig::copy_memory_gbps).
struct UnitComm {
  std::vector<int64_t> gather, scatter, gather_copy, scatter_copy;
};

absl::StatusOr<UnitComm> CommOfUnits(const std::vector<FsdpUnit>& units, const FsdpConfig& config,
                                     int64_t ranks) {
  const size_t n = units.size();
  UnitComm c{std::vector<int64_t>(n, 0), std::vector<int64_t>(n, 0), std::vector<int64_t>(n, 0),
             std::vector<int64_t>(n, 0)};
  if (ranks <= 1) return c;
  for (size_t u = 0; u < n; ++u) {
    const AllReduceShape shape{units[u].bytes, config.ranks_per_node, config.nodes};
    absl::StatusOr<int64_t> ag = RingAllGatherNs(shape, config.link);
    if (!ag.ok()) return ag.status();
    absl::StatusOr<int64_t> rs = RingReduceScatterNs(shape, config.link);
    if (!rs.ok()) return rs.status();
    c.gather[u] = *ag;
    c.scatter[u] = *rs;
    const double bytes = static_cast<double>(units[u].bytes);
    c.gather_copy[u] =
        CopyNs(2.0 * bytes / static_cast<double>(ranks) + 2.0 * bytes, config.copy_memory_gbps);
    c.scatter_copy[u] = CopyNs(2.0 * bytes, config.copy_memory_gbps);
  }
  return c;
}

// How the host's time is spread over the step: the time before the
// optimizer in proportion to each part's single-GPU GPU time, and FSDP2's
// hook before each unit's forward and backward. All zero where the host
// time is not known.
struct HostShare {
  double per_gpu_ns = 0;
  int64_t hook_ns = 0;
  int64_t optimizer_ns = 0;

  HostShare(const FsdpIteration& iteration, const FsdpConfig& config) {
    if (iteration.host_ns <= 0) return;
    double gpu = static_cast<double>(iteration.tail_forward_ns);
    for (const FsdpUnit& unit : iteration.units) {
      gpu += static_cast<double>(unit.forward_ns) + unit.backward_ns;
    }
    optimizer_ns = std::clamp<int64_t>(iteration.optimizer_host_ns, 0, iteration.host_ns);
    per_gpu_ns = gpu > 0 ? static_cast<double>(iteration.host_ns - optimizer_ns) / gpu : 0;
    hook_ns = config.host_ns_per_unit / 2;
  }
  int64_t Of(int64_t gpu_ns) const {
    return std::llround(per_gpu_ns * static_cast<double>(gpu_ns));
  }
};

}  // namespace

absl::StatusOr<FsdpStepPrediction> PredictFsdpStep(const FsdpIteration& iteration,
                                                   const FsdpConfig& config) {
  if (absl::Status s = ValidateStepInput(iteration, config); !s.ok()) return s;
  const std::vector<FsdpUnit>& units = iteration.units;
  const int64_t ranks = static_cast<int64_t>(config.ranks_per_node) * config.nodes;
  absl::StatusOr<UnitComm> comm = CommOfUnits(units, config, ranks);
  if (!comm.ok()) return comm.status();
  const std::vector<int64_t>& gather = comm->gather;
  FsdpStepPrediction p;
  p.num_units = static_cast<int>(units.size());
  p.sharded_optimizer_ns = iteration.optimizer_ns / ranks;
  if (ranks > 1) p.unsharded_in_flight_bytes = UnshardedInFlightBytes(iteration);
  for (size_t u = 0; u < units.size(); ++u) {
    p.all_gather_ns += 2 * gather[u];
    p.reduce_scatter_ns += comm->scatter[u];
    p.copy_ns += 2 * comm->gather_copy[u] + comm->scatter_copy[u];
  }
  // The host's clock, where its time is known: FSDP2's hook of a unit,
  // then the unit's share of the single-GPU host time.
  const HostShare host_share(iteration, config);
  int64_t host = 0;
  CommStream stream;
  int64_t compute_free = 0;
  // Runs `ns` of compute from `start`, stretched while a collective runs,
  // and done no earlier than the host has launched it (`launched`).
  const double extra = config.compute_slowdown - 1.0;
  // Where the host is later than the GPU would be, the GPU waits for it.
  auto after_host = [&p](int64_t gpu_ready, int64_t host_ready) {
    p.host_wait_ns += std::max<int64_t>(0, host_ready - gpu_ready);
    return std::max(gpu_ready, host_ready);
  };
  auto compute = [&](int64_t start, int64_t ns, int64_t launched) {
    const int64_t slowed =
        std::llround(extra * static_cast<double>(stream.BusyWithin(start, start + ns)));
    p.interference_ns += slowed;
    return after_host(start + ns + slowed, launched);
  };
  const size_t n = units.size();
  // Forward: unit u+1 is gathered while unit u computes.
  std::vector<int64_t> gathered(n, 0);
  host = host_share.hook_ns;
  if (n > 0) gathered[0] = stream.Run(host, gather[0]);
  for (size_t u = 0; u < n; ++u) {
    if (u > 0) host += host_share.hook_ns;
    const int64_t start = after_host(std::max(compute_free, gathered[u]), host);
    if (u + 1 < n) gathered[u + 1] = stream.Run(start, gather[u + 1]);
    host += host_share.Of(units[u].forward_ns);
    compute_free = compute(start, units[u].forward_ns + comm->gather_copy[u], host);
  }
  // Backward: the last unit is gathered again as soon as its forward is
  // done, then each unit's predecessor while it computes; each unit's
  // gradients are reduce-scattered when its backward is done.
  if (n > 0) gathered[n - 1] = stream.Run(compute_free, gather[n - 1]);
  host += host_share.Of(iteration.tail_forward_ns);
  compute_free = compute(compute_free, iteration.tail_forward_ns, host);
  p.forward_end_ns = compute_free;
  for (size_t v = n; v-- > 0;) {
    host += host_share.hook_ns;
    const int64_t start = after_host(std::max(compute_free, gathered[v]), host);
    if (v > 0) gathered[v - 1] = stream.Run(start, gather[v - 1]);
    host += host_share.Of(units[v].backward_ns);
    compute_free =
        compute(start, units[v].backward_ns + comm->gather_copy[v] + comm->scatter_copy[v], host);
    stream.Run(compute_free, comm->scatter[v]);
  }
  p.backward_end_ns = std::max(compute_free, stream.free_ns);
  // The optimizer's kernels start once the backward is done and the host
  // has begun launching them, and run on while it launches the rest.
  const int64_t optimizer_start = after_host(p.backward_end_ns, host);
  host += host_share.optimizer_ns;
  p.step_ns = after_host(optimizer_start + p.sharded_optimizer_ns, host);
  p.compute_ns = iteration.tail_forward_ns + p.sharded_optimizer_ns + p.copy_ns + p.interference_ns;
  for (const FsdpUnit& unit : units) p.compute_ns += unit.forward_ns + unit.backward_ns;
  p.exposed_comm_ns = p.step_ns - p.compute_ns;
  return p;
}

int64_t UnshardedInFlightBytes(const FsdpIteration& iteration) {
  int64_t first = 0;
  int64_t second = 0;
  for (const FsdpUnit& unit : iteration.units) {
    if (unit.bytes > first) {
      second = first;
      first = unit.bytes;
    } else if (unit.bytes > second) {
      second = unit.bytes;
    }
  }
  return first + second;
}

}  // namespace habitat
