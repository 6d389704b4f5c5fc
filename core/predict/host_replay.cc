#include "core/predict/host_replay.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace habitat {
namespace {

struct Activity {
  Nanoseconds launch = 0;  // CPU time of the launch call
  Nanoseconds start = 0;   // origin GPU start
  Nanoseconds duration = 0;
  Nanoseconds end = 0;  // origin GPU end
  uint32_t stream = 0;
};

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

template <typename Record>
void AddActivity(const Record& r, double scale, double host_scale, std::vector<Activity>* out) {
  Activity a;
  a.start = Clamp(r.start_ns());
  a.end = Add(a.start, Clamp(r.duration_ns()));
  // Without a launch time, assume it was launched when it started.
  a.launch = ScaleTime(r.has_launch_time() ? r.launch_ns() : r.start_ns(), host_scale);
  a.duration = std::max<Nanoseconds>(0, ScaleTime(r.duration_ns(), scale));
  a.stream = r.stream();
  out->push_back(a);
}

void AddPass(const v1::Pass& pass, double scale, double host_scale, std::vector<Activity>* out) {
  for (const auto& k : pass.kernels()) AddActivity(k, scale, host_scale, out);
  for (const auto& m : pass.memory()) AddActivity(m, scale, host_scale, out);
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

absl::StatusOr<ReplayResult> ReplayIteration(const v1::Trace& trace,
                                             const std::vector<double>& pass_scale,
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
  std::vector<Activity> activities;
  for (int i = 0; i < trace.operations_size(); ++i) {
    AddPass(trace.operations(i).forward(), pass_scale[2 * i], host_scale, &activities);
    AddPass(trace.operations(i).backward(), pass_scale[2 * i + 1], host_scale, &activities);
  }
  for (const auto& k : trace.unattributed_kernels()) {
    AddActivity(k, pass_scale.back(), host_scale, &activities);
  }
  // CPU order; ties (same launch) keep GPU order.
  std::stable_sort(activities.begin(), activities.end(), [](const Activity& a, const Activity& b) {
    return a.launch != b.launch ? a.launch < b.launch : a.start < b.start;
  });

  // Happens-before across streams: work that ended on the origin before an
  // activity started (on another stream: cuDNN's multi-stream LSTMs, side
  // streams) is taken to be what it waited for (events), so on the target it
  // also starts after that work's replayed end. Without this, streams that
  // were serialised by events replay concurrently and the GPU-busy time
  // shrinks (GNMT: -28% replaying the origin itself). A Fenwick tree over the
  // origin end times holds the maximum replayed end per prefix.
  std::vector<Nanoseconds> origin_ends;
  origin_ends.reserve(activities.size());
  for (const auto& a : activities) origin_ends.push_back(a.end);
  std::sort(origin_ends.begin(), origin_ends.end());
  std::vector<Nanoseconds> ended_before(origin_ends.size() + 1, 0);
  auto record_end = [&](Nanoseconds origin_end, Nanoseconds target_end) {
    size_t i =
        static_cast<size_t>(std::lower_bound(origin_ends.begin(), origin_ends.end(), origin_end) -
                            origin_ends.begin()) +
        1;
    for (; i < ended_before.size(); i += i & (~i + 1)) {
      ended_before[i] = std::max(ended_before[i], target_end);
    }
  };
  // Latest replayed end of the work that ended on the origin at or before
  // `origin_start` (and was launched earlier: later launches are not known).
  auto latest_end_before = [&](Nanoseconds origin_start) {
    size_t i =
        static_cast<size_t>(std::upper_bound(origin_ends.begin(), origin_ends.end(), origin_start) -
                            origin_ends.begin());
    Nanoseconds latest = 0;
    for (; i > 0; i -= i & (~i + 1)) latest = std::max(latest, ended_before[i]);
    return latest;
  };

  Nanoseconds cpu_shift = 0;  // target CPU time minus origin CPU time
  Nanoseconds origin_gpu_done = 0, target_gpu_done = 0;
  Nanoseconds cpu_end = 0;
  absl::flat_hash_map<uint32_t, Nanoseconds> stream_free;
  std::vector<std::pair<Nanoseconds, Nanoseconds>> spans;
  spans.reserve(activities.size());
  size_t next = 0;
  auto launch_until = [&](Nanoseconds cpu_time) {
    for (; next < activities.size() && activities[next].launch <= cpu_time; ++next) {
      const Activity& a = activities[next];
      Nanoseconds& free = stream_free[a.stream];
      const Nanoseconds start =
          std::max({Add(a.launch, cpu_shift), free, latest_end_before(a.start)});
      free = Add(start, a.duration);
      record_end(a.end, free);
      spans.emplace_back(start, free);
      target_gpu_done = std::max(target_gpu_done, free);
      origin_gpu_done = std::max(origin_gpu_done, a.end);
      cpu_end = std::max(cpu_end, a.launch);
    }
  };
  for (const auto& wait : trace.host_events()) {
    launch_until(ScaleTime(wait.cpu_start_ns(), host_scale));
    // What the call cost beyond waiting for the GPU on the origin (origin
    // times), then on the replayed host.
    const Nanoseconds cpu_start = Clamp(wait.cpu_start_ns());
    const Nanoseconds origin_end = Add(cpu_start, Clamp(wait.cpu_duration_ns()));
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
  // Host work after the last launch (Python, optimizer bookkeeping).
  for (const auto& op : trace.operations()) {
    cpu_end = std::max(
        cpu_end, ScaleTime(Add(Clamp(op.cpu_start_ns()), Clamp(op.cpu_duration_ns())), host_scale));
  }

  ReplayResult result;
  result.wall_ns = std::max(Add(cpu_end, cpu_shift), target_gpu_done);
  result.gpu_busy_ns = UnionLength(std::move(spans));
  return result;
}

absl::StatusOr<double> CalibrateHostScale(const v1::Trace& trace, Nanoseconds measured_wall_ns,
                                          const StopCondition* stop) {
  const std::vector<double> identity(2 * trace.operations_size() + 1, 1.0);
  double low = 0.05, high = 1.0;
  if (stop == nullptr) stop = &StopCondition::Never();
  auto wall_at = [&](double scale) -> absl::StatusOr<Nanoseconds> {
    if (absl::Status go_on = stop->Check("calibrating the host timeline"); !go_on.ok()) {
      return go_on;
    }
    auto replay = ReplayIteration(trace, identity, scale);
    if (!replay.ok()) return replay.status();
    return replay->wall_ns;
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

}  // namespace habitat
