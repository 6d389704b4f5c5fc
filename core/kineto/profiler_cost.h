// What torch.profiler cost the host during a profiled iteration, estimated
// from the events it recorded, and the host timeline with that cost taken
// out (docs/profiled_wall_time.md).
//
// A profiled step runs slower on the host than an unprofiled one: for every
// op the profiler records (cpu_op, with record_shapes its input shapes) it
// runs its entry and exit callbacks, and CUPTI records every CUDA runtime
// call. A host-bound iteration's wall time grows by all of it (how much on
// the committed H100 fixtures: docs/profiled_wall_time.md, first section).
// The cost per event scales with the host's speed, so it is counted in units
// of the trace's own "sibling gap": the median gap between consecutive
// cpu_ops nested in one cpu_op, where little but the profiler's exit
// callback of the one and entry callback of the next runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/time_units.h"
#include "core/kineto/kineto_events.h"
#include "core/kineto/kineto_structure.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {
namespace kineto {

// The profiler's host cost per recorded event, in sibling gaps. Measured on
// the lent H200 (torch 2.11.0+cu130, record_shapes=True, profile_memory
// False, with_stack False), profiled and unprofiled steps interleaved in one
// profiler session: least squares over loops of views, allocations, adds,
// stream queries, linears and small MLP training steps, per event in ns,
// divided by the loops' sibling gap. Script and output:
// eval/profiled_wall/measure_profiler_cost_interleaved.py,
// eval/profiled_wall/results/2026-11-29_h200/; the measured costs, the
// derivation and the check against the committed H200 and H100 fixtures:
// docs/profiled_wall_time.md, "Where the constants come from".
// profile_memory's [memory] events cost nothing measurable there, so they
// are not counted.
struct ProfilerCostModel {
  double per_cpu_op = 1.84;
  double per_launch = 0.69;        // a runtime/driver call that launched GPU work
  double per_runtime_call = 0.33;  // any other runtime/driver call
};
inline constexpr ProfilerCostModel kProfilerCostModel{};

// Fewer nested sibling pairs than this do not tell the host's speed.
inline constexpr int kMinSiblingPairs = 20;

// The estimate for one iteration [start, end] (trace clock).
class ProfilerCost {
 public:
  // Empty when the cost was estimated; otherwise why it could not be, as a
  // phrase ("the profile was taken without record_shapes=True").
  const std::string& not_estimated() const { return not_estimated_; }
  bool estimated() const { return not_estimated_.empty(); }

  Nanoseconds sibling_gap_ns() const { return sibling_gap_ns_; }
  int sibling_pairs() const { return sibling_pairs_; }
  int64_t cpu_ops() const { return cpu_ops_; }
  int64_t launches() const { return launches_; }
  int64_t runtime_calls() const { return runtime_calls_; }
  // What the events cost by the model, and what could be taken out of the
  // timeline: never more than the time that passed (see Corrected).
  Nanoseconds estimated_ns() const { return incurred_.empty() ? 0 : incurred_.back(); }
  Nanoseconds removed_ns() const { return Removed(end_); }

  // `t` (trace clock) on the host without the profiler: t less the cost
  // taken out by then. An event's cost is taken out of the host time that
  // follows its start, at most all of it: what does not fit before the next
  // event is carried on, so the corrected clock never runs backwards and
  // never gains on the recorded one. Nothing is taken out before `start`.
  Nanoseconds Corrected(Nanoseconds t) const { return t - Removed(t); }

 private:
  friend ProfilerCost EstimateProfilerCost(const ParsedTrace&, const OpForest&, const LaunchIndex&,
                                           Nanoseconds, Nanoseconds, const ProfilerCostModel&);
  Nanoseconds Removed(Nanoseconds t) const;

  std::string not_estimated_;
  Nanoseconds start_ = 0, end_ = 0;
  Nanoseconds sibling_gap_ns_ = 0;
  int sibling_pairs_ = 0;
  int64_t cpu_ops_ = 0, launches_ = 0, runtime_calls_ = 0;
  // At each event start in the iteration, in time order: the cost incurred
  // by then (the event's own included) and the cost taken out by then.
  std::vector<Nanoseconds> times_, incurred_, removed_;
};

// Estimates the cost for the iteration [start, end] of `trace`. Not
// estimated (and Corrected the identity) when the profile lacks what the
// model needs: cpu_op events, record_shapes, enough nested ops to measure
// the host's speed by, or when it was taken with with_stack=True (Python
// stacks, whose cost is not modelled).
ProfilerCost EstimateProfilerCost(const ParsedTrace& trace, const OpForest& forest,
                                  const LaunchIndex& launches, Nanoseconds start, Nanoseconds end,
                                  const ProfilerCostModel& model = kProfilerCostModel);

// Sets out's iteration_wall_ns and host timeline for the iteration [start,
// end] of `trace` (out's times relative to `start`). With
// `measured_wall_ns` (timed without the profiler) the timeline stays as
// profiled and the wall time is the measured one; without, the estimated
// cost is taken out of every host time (operations' and host events' CPU
// ranges, launch times; GPU times stay) and the wall time is the corrected
// origin replayed as it ran. Metadata "kineto.host_timeline" says which
// (core/kineto/kineto_import.h).
void SetHostTimeline(const ParsedTrace& trace, const OpForest& forest, const LaunchIndex& launches,
                     Nanoseconds start, Nanoseconds end,
                     std::optional<Nanoseconds> measured_wall_ns, habitat::v1::Trace* out);

}  // namespace kineto
}  // namespace habitat
