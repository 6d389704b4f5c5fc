#include "core/predict/host_replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace habitat {
namespace {

// Every time in the replay stays within +-kTimeLimit (about 146 years), so
// that sums of a few of them cannot overflow; results that would go beyond
// saturate there instead of wrapping around.
constexpr Nanoseconds kTimeLimit = Nanoseconds{1} << 62;
// Scales outside this range say that a caller's arithmetic went wrong.
constexpr double kMaxScale = 1e6;

Nanoseconds Clamp(Nanoseconds t) { return std::clamp(t, -kTimeLimit, kTimeLimit); }

Nanoseconds Add(Nanoseconds a, Nanoseconds b) {
  Nanoseconds sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return a > 0 ? kTimeLimit : -kTimeLimit;
  return Clamp(sum);
}

Nanoseconds Subtract(Nanoseconds a, Nanoseconds b) {
  Nanoseconds difference = 0;
  if (__builtin_sub_overflow(a, b, &difference)) return a > b ? kTimeLimit : -kTimeLimit;
  return Clamp(difference);
}

Nanoseconds ScaleTime(Nanoseconds t, double scale) {
  const double scaled = static_cast<double>(t) * scale;
  const double limit = static_cast<double>(kTimeLimit);
  if (!(scaled > -limit)) return -kTimeLimit;  // also NaN
  if (scaled > limit) return kTimeLimit;
  return static_cast<Nanoseconds>(std::llround(scaled));
}

bool IsValidScale(double scale) { return scale >= 0.0 && scale <= kMaxScale; }  // NaN: false

}  // namespace

// One kernel or copy as recorded: what the scales do not change.
struct Recorded {
  Nanoseconds start = 0;  // origin GPU start
  Nanoseconds end = 0;    // origin GPU end
  Nanoseconds raw_launch = 0;
  Nanoseconds raw_duration = 0;
  uint32_t pass = 0;    // index into pass_scale
  uint32_t stream = 0;  // dense index of its stream
  // Fenwick positions over the sorted origin ends (see Replay): of its own
  // end (lower bound + 1), and of the ends at or before its start (upper
  // bound).
  uint32_t end_rank = 0;
  uint32_t ended_before_start = 0;
  // The launch queue (kLaunchQueueDepth): the activity whose end frees this
  // launch a slot on its stream, as an index into ReplayPlan::activities, or
  // -1 while the stream's queue cannot be full; and when that freed the
  // origin's launch call, where it did wait (kNoQueueWait otherwise).
  int32_t queue_ahead = -1;
  Nanoseconds origin_queue_release = 0;
};

namespace {
constexpr Nanoseconds kNoQueueWait = std::numeric_limits<Nanoseconds>::min();
}  // namespace

struct ReplayPlan {
  std::vector<Recorded> activities;  // in trace order
  // Indices ordered by (raw launch, origin start, trace order): the replay
  // order whenever scaling the launches ties none of them.
  std::vector<uint32_t> by_launch;
  size_t streams = 0;
  // The latest end of an operation's CPU time (origin times).
  Nanoseconds last_op_cpu_end = std::numeric_limits<Nanoseconds>::min();
  // Launch times of the host-to-device copies, sorted (origin times).
  std::vector<Nanoseconds> host_to_device_launches;
};

namespace {

template <typename Record>
void AddRecorded(const Record& r, uint32_t pass, absl::flat_hash_map<uint32_t, uint32_t>* streams,
                 std::vector<Recorded>* out) {
  Recorded a;
  a.start = Clamp(r.start_ns());
  a.end = Add(a.start, Clamp(r.duration_ns()));
  // Without a launch time, assume it was launched when it started.
  a.raw_launch = r.has_launch_time() ? r.launch_ns() : r.start_ns();
  a.raw_duration = r.duration_ns();
  a.pass = pass;
  a.stream = streams->try_emplace(r.stream(), static_cast<uint32_t>(streams->size())).first->second;
  out->push_back(a);
}

}  // namespace

namespace {

// Each stream's activities in launch order, their origin queue (how many
// were launched and not done when each launch call began) and so the slot
// each waits for: a stream holds kLaunchQueueDepth, or as many as the
// origin was seen to hold where that is more. A launch call waited on the
// origin where its slot freed after the call began and the host began no
// other launch meanwhile (a blocked call holds its thread).
void PlanLaunchQueues(ReplayPlan* plan) {
  std::vector<std::vector<uint32_t>> on_stream(plan->streams);
  std::vector<Nanoseconds> next_launch(plan->activities.size(),
                                       std::numeric_limits<Nanoseconds>::max());
  for (size_t k = 0; k < plan->by_launch.size(); ++k) {
    const uint32_t i = plan->by_launch[k];
    on_stream[plan->activities[i].stream].push_back(i);
    if (k + 1 < plan->by_launch.size()) {
      next_launch[i] = plan->activities[plan->by_launch[k + 1]].raw_launch;
    }
  }
  for (const std::vector<uint32_t>& order : on_stream) {
    std::vector<Nanoseconds> ends;
    ends.reserve(order.size());
    for (uint32_t i : order) ends.push_back(plan->activities[i].end);
    std::sort(ends.begin(), ends.end());
    size_t depth = kLaunchQueueDepth;
    for (size_t k = 0; k < order.size(); ++k) {
      const Nanoseconds launch = plan->activities[order[k]].raw_launch;
      const size_t done =
          static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), launch) - ends.begin());
      if (k > done) depth = std::max(depth, k - done);
    }
    for (size_t k = depth; k < order.size(); ++k) {
      Recorded& r = plan->activities[order[k]];
      const Recorded& ahead = plan->activities[order[k - depth]];
      r.queue_ahead = static_cast<int32_t>(order[k - depth]);
      const bool waited = ahead.end > r.raw_launch && next_launch[order[k]] >= ahead.end;
      r.origin_queue_release = waited ? ahead.end : kNoQueueWait;
    }
  }
}

}  // namespace

std::shared_ptr<const ReplayPlan> PlanReplay(const v1::Trace& trace) {
  auto shared = std::make_shared<ReplayPlan>();
  ReplayPlan& plan = *shared;
  absl::flat_hash_map<uint32_t, uint32_t> streams;
  auto add_pass = [&](const v1::Pass& pass, uint32_t index) {
    for (const auto& k : pass.kernels()) AddRecorded(k, index, &streams, &plan.activities);
    for (const auto& m : pass.memory()) {
      AddRecorded(m, index, &streams, &plan.activities);
      if (m.kind() == v1::MemoryActivity::KIND_MEMCPY_HTOD && m.has_launch_time()) {
        plan.host_to_device_launches.push_back(m.launch_ns());
      }
    }
  };
  for (int i = 0; i < trace.operations_size(); ++i) {
    const v1::Operation& op = trace.operations(i);
    add_pass(op.forward(), 2 * static_cast<uint32_t>(i));
    add_pass(op.backward(), 2 * static_cast<uint32_t>(i) + 1);
    plan.last_op_cpu_end =
        std::max(plan.last_op_cpu_end, Add(Clamp(op.cpu_start_ns()), Clamp(op.cpu_duration_ns())));
  }
  const uint32_t unattributed = 2 * static_cast<uint32_t>(trace.operations_size());
  for (const auto& k : trace.unattributed_kernels()) {
    AddRecorded(k, unattributed, &streams, &plan.activities);
  }
  plan.streams = streams.size();
  std::sort(plan.host_to_device_launches.begin(), plan.host_to_device_launches.end());
  std::vector<Nanoseconds> origin_ends;
  origin_ends.reserve(plan.activities.size());
  for (const auto& a : plan.activities) origin_ends.push_back(a.end);
  std::sort(origin_ends.begin(), origin_ends.end());
  for (auto& a : plan.activities) {
    a.end_rank = static_cast<uint32_t>(
        std::lower_bound(origin_ends.begin(), origin_ends.end(), a.end) - origin_ends.begin() + 1);
    a.ended_before_start = static_cast<uint32_t>(
        std::upper_bound(origin_ends.begin(), origin_ends.end(), a.start) - origin_ends.begin());
  }
  plan.by_launch.resize(plan.activities.size());
  for (uint32_t i = 0; i < plan.by_launch.size(); ++i) plan.by_launch[i] = i;
  const auto& all = plan.activities;
  std::sort(plan.by_launch.begin(), plan.by_launch.end(), [&all](uint32_t a, uint32_t b) {
    return std::tie(all[a].raw_launch, all[a].start, a) <
           std::tie(all[b].raw_launch, all[b].start, b);
  });
  PlanLaunchQueues(&plan);
  return shared;
}

namespace {

// Whether a copy call launched a host-to-device copy within its CPU time.
// One that returned while the origin's GPU still ran work launched before
// it did not wait for that work (from pageable host memory it stages and
// returns): its time is the host's own.
bool LaunchesHostToDevice(const ReplayPlan& plan, const v1::HostEvent& call) {
  if (!absl::StartsWith(call.name(), "cudaMemcpy") && !absl::StartsWith(call.name(), "cuMemcpy")) {
    return false;
  }
  const auto& launches = plan.host_to_device_launches;
  auto it = std::lower_bound(launches.begin(), launches.end(), call.cpu_start_ns());
  return it != launches.end() && *it <= call.cpu_start_ns() + call.cpu_duration_ns();
}

// One activity of a replay, scaled.
struct Activity {
  Nanoseconds launch = 0;  // CPU time of the launch call
  Nanoseconds duration = 0;
  const Recorded* recorded = nullptr;
};

// The activities scaled, in CPU order; ties (same launch) keep GPU order,
// then trace order.
std::vector<Activity> ScaledActivities(const ReplayPlan& plan,
                                       const std::vector<double>& pass_scale, double host_scale) {
  const std::vector<Recorded>& all = plan.activities;
  std::vector<Nanoseconds> launch(all.size());
  for (size_t i = 0; i < all.size(); ++i) launch[i] = ScaleTime(all[i].raw_launch, host_scale);
  auto before = [&](uint32_t a, uint32_t b) {
    return std::tie(launch[a], all[a].start, a) < std::tie(launch[b], all[b].start, b);
  };
  std::vector<uint32_t> order = plan.by_launch;
  // Scaling keeps the launches' order but may round two to one time; then
  // the origin start decides, and the plan's order may not hold.
  bool in_order = true;
  for (size_t i = 1; i < order.size() && in_order; ++i) in_order = before(order[i - 1], order[i]);
  if (!in_order) std::sort(order.begin(), order.end(), before);
  std::vector<Activity> out;
  out.reserve(order.size());
  for (uint32_t i : order) {
    const Recorded& r = all[i];
    out.push_back(Activity{
        launch[i], std::max<Nanoseconds>(0, ScaleTime(r.raw_duration, pass_scale[r.pass])), &r});
  }
  return out;
}

Nanoseconds UnionLength(std::vector<std::pair<Nanoseconds, Nanoseconds>> spans) {
  std::sort(spans.begin(), spans.end());
  Nanoseconds total = 0;
  Nanoseconds cursor = std::numeric_limits<Nanoseconds>::min();
  for (const auto& [start, end] : spans) {
    cursor = std::max(cursor, start);
    if (end > cursor) {
      total = Add(total, Subtract(end, cursor));
      cursor = end;
    }
  }
  return total;
}

}  // namespace

bool HasHostTimeline(const v1::Trace& trace) {
  for (const auto& op : trace.operations()) {
    for (const auto& k : op.forward().kernels()) {
      if (k.has_launch_time()) return true;
    }
  }
  return false;
}

namespace {

absl::Status CheckScales(const v1::Trace& trace, const std::vector<double>& pass_scale,
                         double host_scale) {
  const size_t passes = 2 * static_cast<size_t>(trace.operations_size()) + 1;
  if (pass_scale.size() != passes) {
    return absl::InvalidArgumentError("pass_scale must have one entry per pass");
  }
  if (!(host_scale > 0.0 && host_scale <= kMaxScale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("host_scale must be within (0, ", kMaxScale, "], got ", host_scale));
  }
  for (size_t i = 0; i < passes; ++i) {
    if (!IsValidScale(pass_scale[i])) {
      return absl::InvalidArgumentError(absl::StrCat("pass_scale[", i, "] must be within [0, ",
                                                     kMaxScale, "], got ", pass_scale[i]));
    }
  }
  if (!HasHostTimeline(trace)) {
    return absl::FailedPreconditionError("the trace has no kernel launch times");
  }
  return absl::OkStatus();
}

// Happens-before across streams: work that ended on the origin before an
// activity started (on another stream: cuDNN's multi-stream LSTMs, side
// streams) is taken to be what it waited for (events), so on the target it
// also starts after that work's replayed end. Without this, streams that
// were serialised by events replay concurrently and the GPU-busy time
// shrinks (GNMT: -28% replaying the origin itself). A Fenwick tree over the
// origin end times holds the maximum replayed end per prefix.
class ReplayedEnds {
 public:
  explicit ReplayedEnds(size_t activities) : max_(activities + 1, 0) {}
  // The activity at `end_rank` (ReplayPlan's) ended at `target_end`.
  void Record(size_t end_rank, Nanoseconds target_end) {
    for (size_t i = end_rank; i < max_.size(); i += i & (~i + 1)) {
      max_[i] = std::max(max_[i], target_end);
    }
  }
  // Latest replayed end of the work that ended on the origin at or before
  // the activity's origin start (`ended_before_start`; and was launched
  // earlier: later launches are not known).
  Nanoseconds Latest(size_t ended_before_start) const {
    Nanoseconds latest = 0;
    for (size_t i = ended_before_start; i > 0; i -= i & (~i + 1)) {
      latest = std::max(latest, max_[i]);
    }
    return latest;
  }

 private:
  std::vector<Nanoseconds> max_;
};

// The CPU shift once `a`'s launch call has a slot in its stream's queue: on
// the origin it waited for as long as it did there (its recorded gap to the
// next launch is then waiting, not host work); here it waits until the
// replayed GPU frees the slot (`replayed_end`, by plan index).
Nanoseconds ShiftAfterQueue(const Activity& a, const std::vector<Nanoseconds>& replayed_end,
                            Nanoseconds cpu_shift, double host_scale) {
  const Recorded& r = *a.recorded;
  if (r.queue_ahead < 0) return cpu_shift;
  const Nanoseconds slot = replayed_end[static_cast<size_t>(r.queue_ahead)];
  const Nanoseconds call = Add(a.launch, cpu_shift);
  if (r.origin_queue_release != kNoQueueWait) {
    return Subtract(std::max(call, slot), ScaleTime(r.origin_queue_release, host_scale));
  }
  return slot > call ? Add(cpu_shift, Subtract(slot, call)) : cpu_shift;
}

// ReplayIteration on `plan`, the trace's; the scales are checked.
ReplayResult Replay(const v1::Trace& trace, const ReplayPlan& plan,
                    const std::vector<double>& pass_scale, double host_scale) {
  const std::vector<Activity> activities = ScaledActivities(plan, pass_scale, host_scale);
  ReplayedEnds ended_before(activities.size());
  Nanoseconds cpu_shift = 0;  // target CPU time minus origin CPU time
  Nanoseconds origin_gpu_done = 0, target_gpu_done = 0;
  Nanoseconds cpu_end = 0;
  std::vector<Nanoseconds> stream_free(plan.streams, 0);
  std::vector<std::pair<Nanoseconds, Nanoseconds>> spans;
  spans.reserve(activities.size());
  // Replayed ends by ReplayPlan::activities index, for the launch queue.
  std::vector<Nanoseconds> replayed_end(plan.activities.size(), 0);
  size_t next = 0;
  auto launch_until = [&](Nanoseconds cpu_time) {
    for (; next < activities.size() && activities[next].launch <= cpu_time; ++next) {
      const Activity& a = activities[next];
      const Recorded& r = *a.recorded;
      cpu_shift = ShiftAfterQueue(a, replayed_end, cpu_shift, host_scale);
      Nanoseconds& free = stream_free[r.stream];
      const Nanoseconds start =
          std::max({Add(a.launch, cpu_shift), free, ended_before.Latest(r.ended_before_start)});
      free = Add(start, a.duration);
      replayed_end[static_cast<size_t>(&r - plan.activities.data())] = free;
      ended_before.Record(r.end_rank, free);
      spans.emplace_back(start, free);
      target_gpu_done = std::max(target_gpu_done, free);
      origin_gpu_done = std::max(origin_gpu_done, r.end);
      cpu_end = std::max(cpu_end, a.launch);
    }
  };
  for (const auto& wait : trace.host_events()) {
    launch_until(ScaleTime(wait.cpu_start_ns(), host_scale));
    const Nanoseconds cpu_start = Clamp(wait.cpu_start_ns());
    const Nanoseconds origin_end = Add(cpu_start, Clamp(wait.cpu_duration_ns()));
    if (origin_end < origin_gpu_done && LaunchesHostToDevice(plan, wait)) {
      cpu_end = std::max(cpu_end, ScaleTime(origin_end, host_scale));
      continue;
    }
    // What the call cost beyond waiting for the GPU on the origin (origin
    // times), then on the replayed host.
    const Nanoseconds overhead = ScaleTime(
        std::max<Nanoseconds>(0, Subtract(origin_end, std::max(cpu_start, origin_gpu_done))),
        host_scale);
    const Nanoseconds call_start = ScaleTime(cpu_start, host_scale);
    const Nanoseconds call_end = std::max(call_start, ScaleTime(origin_end, host_scale));
    const Nanoseconds target_end =
        Add(std::max(Add(call_start, cpu_shift), target_gpu_done), overhead);
    cpu_shift = Subtract(target_end, call_end);
    cpu_end = std::max(cpu_end, call_end);
  }
  launch_until(std::numeric_limits<Nanoseconds>::max());
  // Host work after the last launch (Python, optimizer bookkeeping); scaling
  // keeps the order of times, so the latest end scaled is the latest scaled.
  if (trace.operations_size() > 0) {
    cpu_end = std::max(cpu_end, ScaleTime(plan.last_op_cpu_end, host_scale));
  }

  ReplayResult result;
  result.wall_ns = std::max(Add(cpu_end, cpu_shift), target_gpu_done);
  result.gpu_busy_ns = UnionLength(std::move(spans));
  return result;
}

}  // namespace

absl::StatusOr<ReplayResult> ReplayIteration(const v1::Trace& trace,
                                             const std::vector<double>& pass_scale,
                                             double host_scale) {
  HABITAT_RETURN_IF_ERROR(CheckScales(trace, pass_scale, host_scale));
  return Replay(trace, *PlanReplay(trace), pass_scale, host_scale);
}

absl::StatusOr<ReplayResult> ReplayIteration(const v1::Trace& trace, const ReplayPlan& plan,
                                             const std::vector<double>& pass_scale,
                                             double host_scale) {
  HABITAT_RETURN_IF_ERROR(CheckScales(trace, pass_scale, host_scale));
  return Replay(trace, plan, pass_scale, host_scale);
}

absl::StatusOr<double> CalibrateHostScale(const v1::Trace& trace, Nanoseconds measured_wall_ns,
                                          const StopCondition* stop) {
  const std::vector<double> identity(2 * trace.operations_size() + 1, 1.0);
  double low = 0.05, high = 1.0;
  if (stop == nullptr) stop = &StopCondition::Never();
  HABITAT_RETURN_IF_ERROR(CheckScales(trace, identity, high));
  const std::shared_ptr<const ReplayPlan> plan = PlanReplay(trace);
  auto wall_at = [&](double scale) -> absl::StatusOr<Nanoseconds> {
    if (absl::Status go_on = stop->Check("calibrating the host timeline"); !go_on.ok()) {
      return go_on;
    }
    return Replay(trace, *plan, identity, scale).wall_ns;
  };
  auto at_high = wall_at(high);
  if (!at_high.ok()) return at_high.status();
  if (*at_high <= measured_wall_ns) return high;
  // Replayed wall time grows with host_scale: bisect.
  for (int i = 0; i < 24; ++i) {
    const double mid = 0.5 * (low + high);
    auto wall = wall_at(mid);
    if (!wall.ok()) return wall.status();
    (*wall > measured_wall_ns ? high : low) = mid;
  }
  return high;
}

Nanoseconds HostOnlyNs(const v1::Trace& trace, double host_scale) {
  if (!HasHostTimeline(trace)) return 0;
  const std::vector<double> no_gpu(2 * static_cast<size_t>(trace.operations_size()) + 1, 0.0);
  absl::StatusOr<ReplayResult> host = ReplayIteration(trace, no_gpu, host_scale);
  return host.ok() ? host->wall_ns : 0;
}

}  // namespace habitat
