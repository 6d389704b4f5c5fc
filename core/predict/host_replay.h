// Replays an iteration's host timeline with predicted kernel times, to
// predict wall time rather than only GPU time.
//
// Each kernel or copy is launched by the CPU at its recorded launch time
// (shifted by however much earlier waits moved the CPU), starts at the later
// of its launch and the end of the previous work on its stream, and lasts its
// predicted time. When the CPU waits for the GPU (a synchronize or a copy to
// the host), it resumes when the GPU work launched so far is done, plus the
// call's own overhead as measured on the origin. A launch call also waits
// while its stream already holds kLaunchQueueDepth launches not done. The
// target's host is assumed to be as fast as the origin's.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/time_units.h"
#include "core/predict/stop_condition.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

struct ReplayResult {
  // From the first event to the last CPU or GPU event of the iteration.
  Nanoseconds wall_ns = 0;
  // Union of the replayed GPU intervals.
  Nanoseconds gpu_busy_ns = 0;
};

// How many launched kernels and copies a stream holds before the next
// launch call blocks until one is done: every single-stream agent trace
// whose queue filled (H100 and H200, CUDA 13) holds at most 1022
// (docs/accuracy.md, "The launch queue"). A trace seen to hold more on a
// stream keeps its own depth there.
inline constexpr size_t kLaunchQueueDepth = 1022;

// `pass_scale[i]` scales the device activity of trace pass i, where passes
// are numbered: operation k's forward = 2k, backward = 2k+1, and the
// unattributed kernels = 2 * operations_size(). `host_scale` scales every CPU
// time (a profiled host is slower than an unprofiled one; see
// CalibrateHostScale). FAILED_PRECONDITION when the trace has no launch times;
// INVALID_ARGUMENT when host_scale is not within (0, 1e6] or a pass scale not
// within [0, 1e6] (NaN included). Times saturate at +-2^62 ns (146 years)
// instead of overflowing, whatever the trace holds.
absl::StatusOr<ReplayResult> ReplayIteration(const habitat::v1::Trace& trace,
                                             const std::vector<double>& pass_scale,
                                             double host_scale = 1.0);

// What every replay of one trace shares (its activities in launch order,
// their streams, the order of their origin end times), worked out once: a
// prediction replays its trace once per GPU (docs/benchmarks.md, cold
// predictions).
struct ReplayPlan;
std::shared_ptr<const ReplayPlan> PlanReplay(const habitat::v1::Trace& trace);
// The same as above, on `plan`, which PlanReplay made from `trace`.
absl::StatusOr<ReplayResult> ReplayIteration(const habitat::v1::Trace& trace,
                                             const ReplayPlan& plan,
                                             const std::vector<double>& pass_scale,
                                             double host_scale);

// The host_scale at which replaying the origin (pass scales 1) gives
// `measured_wall_ns`, the wall time measured without a profiler; clamped to
// [0.05, 1] (a GPU-bound iteration cannot tell how fast its host is, and
// then the smallest scale that still explains the wall time is returned).
// It replays the iteration 25 times; `stop` (may be null) is checked
// between replays and its status returned when it says to give up.
absl::StatusOr<double> CalibrateHostScale(const habitat::v1::Trace& trace,
                                          Nanoseconds measured_wall_ns,
                                          const StopCondition* stop = nullptr);

// What the host alone takes for the iteration: its replay with every pass
// taking no GPU time (a wait returns once its call's own overhead is
// spent), on a host of `host_scale`. 0 without a host timeline.
Nanoseconds HostOnlyNs(const habitat::v1::Trace& trace, double host_scale);

// True when the trace has a host timeline that ReplayIteration can use.
bool HasHostTimeline(const habitat::v1::Trace& trace);

// An iteration whose GPU idles for more than this share of its wall time is
// host-bound: the host, not the GPU, sets its pace.
inline constexpr double kHostBoundIdleShare = 0.15;

// Whether `gpu_busy_ns` out of `wall_ns` leaves the GPU idle for more than
// kHostBoundIdleShare of the wall time.
inline bool IsHostBound(Nanoseconds gpu_busy_ns, Nanoseconds wall_ns) {
  return static_cast<double>(gpu_busy_ns) <
         (1.0 - kHostBoundIdleShare) * static_cast<double>(wall_ns);
}

}  // namespace habitat
