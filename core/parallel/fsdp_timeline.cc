#include "core/parallel/fsdp_timeline.h"

#include <algorithm>
#include <numeric>

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
  if (iteration.tail_forward_ns < 0 || iteration.optimizer_ns < 0) {
    return absl::InvalidArgumentError("tail_forward_ns and optimizer_ns must be >= 0");
  }
  double ns = static_cast<double>(iteration.tail_forward_ns) + iteration.optimizer_ns;
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
  int64_t Run(int64_t issue_ns, int64_t ns) {
    free_ns = std::max(free_ns, issue_ns) + ns;
    return free_ns;
  }
};

}  // namespace

absl::StatusOr<FsdpIteration> FsdpUnitsByBytes(const SingleGpuIteration& iteration, int num_units) {
  if (absl::Status s = ValidateUnitInput(iteration, num_units); !s.ok()) return s;
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
    const double target = total * static_cast<double>(out.units.size()) / num_units;
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
  return out;
}

absl::StatusOr<FsdpStepPrediction> PredictFsdpStep(const FsdpIteration& iteration,
                                                   const FsdpConfig& config) {
  if (absl::Status s = ValidateStepInput(iteration, config); !s.ok()) return s;
  const std::vector<FsdpUnit>& units = iteration.units;
  const int64_t ranks = static_cast<int64_t>(config.ranks_per_node) * config.nodes;
  FsdpStepPrediction p;
  p.num_units = static_cast<int>(units.size());
  p.sharded_optimizer_ns = iteration.optimizer_ns / ranks;
  p.compute_ns = iteration.tail_forward_ns + p.sharded_optimizer_ns;
  for (const FsdpUnit& unit : units) p.compute_ns += unit.forward_ns + unit.backward_ns;
  // Gathering and reducing one unit cost the same in both passes.
  std::vector<int64_t> gather(units.size(), 0);
  std::vector<int64_t> scatter(units.size(), 0);
  if (ranks > 1) {
    p.unsharded_in_flight_bytes = UnshardedInFlightBytes(iteration);
    for (size_t u = 0; u < units.size(); ++u) {
      const AllReduceShape shape{units[u].bytes, config.ranks_per_node, config.nodes};
      absl::StatusOr<int64_t> ag = RingAllGatherNs(shape, config.link);
      if (!ag.ok()) return ag.status();
      absl::StatusOr<int64_t> rs = RingReduceScatterNs(shape, config.link);
      if (!rs.ok()) return rs.status();
      gather[u] = *ag;
      scatter[u] = *rs;
      p.all_gather_ns += 2 * *ag;
      p.reduce_scatter_ns += *rs;
    }
  }
  CommStream stream;
  int64_t compute_free = 0;
  const size_t n = units.size();
  // Forward: unit u+1 is gathered while unit u computes.
  std::vector<int64_t> gathered(n, 0);
  if (n > 0) gathered[0] = stream.Run(0, gather[0]);
  for (size_t u = 0; u < n; ++u) {
    const int64_t start = std::max(compute_free, gathered[u]);
    if (u + 1 < n) gathered[u + 1] = stream.Run(start, gather[u + 1]);
    compute_free = start + units[u].forward_ns;
  }
  // Backward: the last unit is gathered again as soon as its forward is
  // done, then each unit's predecessor while it computes; each unit's
  // gradients are reduce-scattered when its backward is done.
  if (n > 0) gathered[n - 1] = stream.Run(compute_free, gather[n - 1]);
  compute_free += iteration.tail_forward_ns;
  p.forward_end_ns = compute_free;
  for (size_t v = n; v-- > 0;) {
    const int64_t start = std::max(compute_free, gathered[v]);
    if (v > 0) gathered[v - 1] = stream.Run(start, gather[v - 1]);
    compute_free = start + units[v].backward_ns;
    stream.Run(compute_free, scatter[v]);
  }
  p.backward_end_ns = std::max(compute_free, stream.free_ns);
  p.step_ns = p.backward_end_ns + p.sharded_optimizer_ns;
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
