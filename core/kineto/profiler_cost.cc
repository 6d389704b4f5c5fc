#include "core/kineto/profiler_cost.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/predict/host_replay.h"

namespace habitat {
namespace kineto {
namespace {

// Whether the profile recorded input shapes: the exporter's top-level
// "record_shapes" where it wrote one, else any of the iteration's cpu_ops
// with "Input Dims".
bool RecordedShapes(const ParsedTrace& trace, const std::vector<int>& ops) {
  auto flag = trace.document.find("record_shapes");
  if (flag != trace.document.end()) {
    if (flag->is_boolean()) return flag->get<bool>();
    if (flag->is_number()) return flag->get<double>() != 0;
  }
  for (int i : ops) {
    const nlohmann::json& raw = trace.RawEvent(trace.host[i].index);
    auto args = raw.find("args");
    if (args != raw.end() && args->is_object() && args->contains("Input Dims")) return true;
  }
  return false;
}

// with_stack=True: the Python tracer's python_function events.
bool RecordedPythonStacks(const ParsedTrace& trace) {
  auto events = trace.document.find("traceEvents");
  if (events == trace.document.end() || !events->is_array()) return false;
  for (const nlohmann::json& e : *events) {
    if (!e.is_object()) continue;
    auto cat = e.find("cat");
    if (cat != e.end() && cat->is_string() &&
        cat->get_ref<const std::string&>() == "python_function") {
      return true;
    }
  }
  return false;
}

Nanoseconds Median(std::vector<Nanoseconds> values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const Nanoseconds upper = values[mid];
  const Nanoseconds lower = *std::max_element(values.begin(), values.begin() + mid);
  return lower + (upper - lower) / 2;
}

// Why the profile lacks what the cost model needs; empty if it has it.
std::string WhyNotEstimable(const ParsedTrace& trace, const std::vector<int>& ops) {
  if (ops.empty()) {
    return "the profile has no cpu_op events in the iteration (ProfilerActivity.CPU was not "
           "recorded)";
  }
  if (!RecordedShapes(trace, ops)) {
    return "the profile was taken without record_shapes=True, whose per-op cost the correction "
           "is measured for";
  }
  if (RecordedPythonStacks(trace)) {
    return "the profile was taken with with_stack=True, whose Python tracer's cost is not "
           "modelled";
  }
  return "";
}

// The gaps between consecutive cpu_ops under one cpu_op, per thread
// (OpForest nests per thread).
std::vector<Nanoseconds> SiblingGaps(const ParsedTrace& trace, const OpForest& forest,
                                     const std::vector<int>& ops) {
  absl::flat_hash_map<int, std::vector<int>> children;
  for (int i : ops) {
    const int parent = forest.parent(i);
    if (parent >= 0) children[parent].push_back(i);
  }
  std::vector<Nanoseconds> gaps;
  for (auto& [parent, kids] : children) {
    std::sort(kids.begin(), kids.end(), [&](int a, int b) {
      return std::pair(trace.host[a].start, a) < std::pair(trace.host[b].start, b);
    });
    for (size_t k = 1; k < kids.size(); ++k) {
      const Nanoseconds gap = trace.host[kids[k]].start - trace.host[kids[k - 1]].end();
      if (gap >= 0) gaps.push_back(gap);
    }
  }
  return gaps;
}

}  // namespace

Nanoseconds ProfilerCost::Removed(Nanoseconds t) const {
  auto after = std::upper_bound(times_.begin(), times_.end(), t);
  if (after == times_.begin()) return 0;
  const size_t k = static_cast<size_t>(after - times_.begin()) - 1;
  return std::min(incurred_[k], removed_[k] + (t - times_[k]));
}

ProfilerCost EstimateProfilerCost(const ParsedTrace& trace, const OpForest& forest,
                                  const LaunchIndex& launches, Nanoseconds start, Nanoseconds end,
                                  const ProfilerCostModel& model) {
  ProfilerCost cost;
  cost.start_ = start;
  cost.end_ = end;
  auto in_window = [&](const HostEvent& e) { return e.start >= start && e.start <= end; };
  std::vector<int> ops, runtime;
  for (size_t i = 0; i < trace.host.size(); ++i) {
    const HostEvent& e = trace.host[i];
    if (!in_window(e)) continue;
    if (forest.IsCpuOp(static_cast<int>(i))) ops.push_back(static_cast<int>(i));
    if (e.kind == EventKind::kRuntime) runtime.push_back(static_cast<int>(i));
  }
  cost.not_estimated_ = WhyNotEstimable(trace, ops);
  if (!cost.estimated()) return cost;
  std::vector<Nanoseconds> gaps = SiblingGaps(trace, forest, ops);
  cost.sibling_pairs_ = static_cast<int>(gaps.size());
  if (cost.sibling_pairs_ < kMinSiblingPairs) {
    cost.not_estimated_ =
        absl::StrCat("the profile has ", cost.sibling_pairs_,
                     " pairs of consecutive ops nested in one op to measure the host's speed by (",
                     kMinSiblingPairs, " needed)");
    return cost;
  }
  cost.sibling_gap_ns_ = Median(std::move(gaps));
  absl::flat_hash_set<int> launched;
  for (const DeviceEvent& d : trace.device) {
    const int call = launches.Find(d).runtime_index;
    if (call >= 0) launched.insert(call);
  }
  const double gap = static_cast<double>(cost.sibling_gap_ns_);
  auto ns = [gap](double units) { return static_cast<Nanoseconds>(std::llround(units * gap)); };
  std::vector<std::pair<Nanoseconds, Nanoseconds>> events;  // (start, cost)
  events.reserve(ops.size() + runtime.size());
  for (int i : ops) events.emplace_back(trace.host[i].start, ns(model.per_cpu_op));
  cost.cpu_ops_ = static_cast<int64_t>(ops.size());
  for (int i : runtime) {
    const bool launch = launched.contains(i);
    events.emplace_back(trace.host[i].start,
                        ns(launch ? model.per_launch : model.per_runtime_call));
    ++(launch ? cost.launches_ : cost.runtime_calls_);
  }
  std::sort(events.begin(), events.end());
  Nanoseconds incurred = 0, removed = 0, previous = start;
  for (const auto& [time, c] : events) {
    // What was incurred before comes out of the time since the previous
    // event, as far as that time goes; this event's cost from the time after.
    removed = std::min(incurred, removed + (time - previous));
    incurred += c;
    if (!cost.times_.empty() && cost.times_.back() == time) {
      cost.incurred_.back() = incurred;
      cost.removed_.back() = removed;
    } else {
      cost.times_.push_back(time);
      cost.incurred_.push_back(incurred);
      cost.removed_.push_back(removed);
    }
    previous = time;
  }
  return cost;
}

namespace {

// The host times of `out` (relative to `start`) on the corrected clock of
// `cost`. GPU times stay as recorded.
void RemoveProfilerCost(const ProfilerCost& cost, Nanoseconds start, v1::Trace* out) {
  auto corrected = [&](Nanoseconds relative) { return cost.Corrected(start + relative) - start; };
  auto correct_range = [&](auto* range) {
    const Nanoseconds from = corrected(range->cpu_start_ns());
    const Nanoseconds to = corrected(range->cpu_start_ns() + range->cpu_duration_ns());
    range->set_cpu_start_ns(from);
    range->set_cpu_duration_ns(to - from);
  };
  auto correct_launch = [&](auto* activity) {
    if (activity->has_launch_time()) activity->set_launch_ns(corrected(activity->launch_ns()));
  };
  auto correct_pass = [&](v1::Pass* pass) {
    for (auto& k : *pass->mutable_kernels()) correct_launch(&k);
    for (auto& m : *pass->mutable_memory()) correct_launch(&m);
  };
  for (v1::Operation& op : *out->mutable_operations()) {
    correct_range(&op);
    // mutable_* would create the passes an operation lacks.
    if (op.has_forward()) correct_pass(op.mutable_forward());
    if (op.has_backward()) correct_pass(op.mutable_backward());
  }
  for (v1::Kernel& k : *out->mutable_unattributed_kernels()) correct_launch(&k);
  for (auto& h : *out->mutable_host_events()) correct_range(&h);
}

}  // namespace

void SetHostTimeline(const ParsedTrace& trace, const OpForest& forest, const LaunchIndex& launches,
                     Nanoseconds start, Nanoseconds end,
                     std::optional<Nanoseconds> measured_wall_ns, v1::Trace* out) {
  auto& meta = *out->mutable_metadata();
  const Nanoseconds profiled = end - start;
  meta["kineto.profiled_step_ns"] = absl::StrCat(profiled);
  if (measured_wall_ns.has_value()) {
    // The host model calibrates the profiled timeline against it.
    out->set_iteration_wall_ns(*measured_wall_ns);
    meta["kineto.host_timeline"] = "profiled; wall time given";
    return;
  }
  const ProfilerCost cost = EstimateProfilerCost(trace, forest, launches, start, end);
  if (!cost.estimated()) {
    out->set_iteration_wall_ns(profiled);
    meta["kineto.host_timeline"] = "profiled";
    meta["kineto.host_timeline_why"] = cost.not_estimated();
    return;
  }
  RemoveProfilerCost(cost, start, out);
  // The unprofiled estimate: the corrected origin replayed as it ran.
  const std::vector<double> as_recorded(2 * static_cast<size_t>(out->operations_size()) + 1, 1.0);
  absl::StatusOr<ReplayResult> replay = ReplayIteration(*out, as_recorded);
  out->set_iteration_wall_ns(replay.ok() ? replay->wall_ns
                                         : std::max<Nanoseconds>(1, cost.Corrected(end) - start));
  meta["kineto.host_timeline"] = "profiler cost removed";
  meta["kineto.profiler_cost_ns"] = absl::StrCat(cost.removed_ns());
  meta["kineto.profiler_cost_events"] =
      absl::StrCat(cost.cpu_ops(), " cpu_ops, ", cost.launches(), " launches, ",
                   cost.runtime_calls(), " other runtime calls");
  meta["kineto.sibling_gap_ns"] = absl::StrCat(cost.sibling_gap_ns());
}

}  // namespace kineto
}  // namespace habitat
