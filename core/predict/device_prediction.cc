#include "core/predict/device_prediction.h"

#include <utility>

#include "common/status_macros.h"
#include "common/time_units.h"
#include "core/predict/expected_error.h"
#include "core/predict/warning_tally.h"

namespace habitat {
namespace {

using habitat::v1::DevicePrediction;
using habitat::v1::DeviceSpec;
using habitat::v1::Operation;
using habitat::v1::OperationPrediction;

void AddToTotals(const OperationPrediction& op, DevicePrediction* prediction) {
  v1::MethodTotal* total = nullptr;
  for (auto& existing : *prediction->mutable_method_totals()) {
    if (existing.method() == op.method()) total = &existing;
  }
  if (total == nullptr) {
    total = prediction->add_method_totals();
    total->set_method(op.method());
  }
  total->set_operations(total->operations() + 1);
  total->set_predicted_ns(SaturatingAdd(
      total->predicted_ns(), SaturatingAdd(op.predicted_forward_ns(), op.predicted_backward_ns())));
  total->set_origin_ns(SaturatingAdd(
      total->origin_ns(), SaturatingAdd(op.origin_forward_ns(), op.origin_backward_ns())));
}

double Ratio(Nanoseconds predicted, Nanoseconds origin) {
  return origin > 0 ? static_cast<double>(predicted) / static_cast<double>(origin) : 1.0;
}

// Host model: replays the iteration with the predicted per-pass ratios on a
// host of the calibrated speed.
void PredictWallTime(const v1::Trace& trace, const ReplayPlan& plan,
                     const std::vector<double>& pass_scale, double host_scale,
                     DevicePrediction* prediction) {
  auto target = ReplayIteration(trace, plan, pass_scale, host_scale);
  if (!target.ok()) return;
  prediction->set_wall_time_ns(target->wall_ns);
  prediction->set_gpu_busy_ns(target->gpu_busy_ns);
  prediction->set_host_bound(IsHostBound(target->gpu_busy_ns, target->wall_ns));
}

// iteration_ns is deprecated for readers; the service still fills it.
void SetGpuTime(Nanoseconds total, DevicePrediction* prediction) {
  prediction->set_gpu_time_ns(total);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  prediction->set_iteration_ns(total);
#pragma GCC diagnostic pop
}

// What an instance bills: the replayed wall time (PredictWallTime's), or
// the GPU time where the trace has no host timeline to replay. wall_ns is
// deprecated for readers; the service still fills it.
void SetWallTime(DevicePrediction* prediction) {
  const bool replayed = prediction->wall_time_ns() > 0;
  if (!replayed) prediction->set_wall_time_ns(prediction->gpu_time_ns());
  prediction->set_wall_time_is_gpu_time(!replayed);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  prediction->set_wall_ns(replayed ? prediction->wall_time_ns() : 0);
#pragma GCC diagnostic pop
}

// The GPU times summed over a device's operations.
struct DeviceSums {
  Nanoseconds predicted = 0;
  Nanoseconds origin = 0;
};

// Kernels the capture could not tie to an op still take GPU time: they are
// predicted as one more operation, added to `prediction` and `sums`.
// Returns the ratio the host replay scales them by (1 without any).
absl::StatusOr<double> PredictUnattributed(const v1::Trace& trace, const DeviceSpec& origin,
                                           const DeviceSpec& target, bool is_origin,
                                           const StopCondition& stop, DeviceSums* sums,
                                           DevicePrediction* prediction) {
  if (trace.unattributed_kernels_size() == 0) return 1.0;
  HABITAT_RETURN_IF_ERROR(stop.Check("predicting ", target.id()));
  v1::Operation loose;
  loose.set_name("(kernels not attributed to an operation)");
  *loose.mutable_forward()->mutable_kernels() = trace.unattributed_kernels();
  VaryingNotes notes;
  OperationPrediction op =
      PredictOperation(trace, loose, static_cast<uint32_t>(trace.operations_size()), FactsOf(loose),
                       origin, target, is_origin, /*varying_table=*/nullptr, &notes);
  for (const auto& kernel : trace.unattributed_kernels()) {
    op.set_origin_forward_ns(op.origin_forward_ns() + kernel.duration_ns());
  }
  sums->origin = SaturatingAdd(sums->origin, op.origin_forward_ns());
  sums->predicted = SaturatingAdd(sums->predicted, op.predicted_forward_ns());
  const double scale = Ratio(op.predicted_forward_ns(), op.origin_forward_ns());
  AddToTotals(op, prediction);
  *prediction->add_operations() = std::move(op);
  return scale;
}

}  // namespace

absl::StatusOr<std::optional<double>> HostScaleFor(const v1::Trace& trace,
                                                   const StopCondition* stop) {
  if (!HasHostTimeline(trace)) return std::nullopt;
  // A profiled host runs slower than an unprofiled one: with a measured wall
  // time, scale the host timeline until replaying the origin reproduces it.
  if (trace.iteration_wall_ns() <= 0) return 1.0;
  auto scale = CalibrateHostScale(trace, trace.iteration_wall_ns(), stop);
  if (scale.ok()) return *scale;
  if (StopCondition::IsStop(scale.status())) return scale.status();
  return std::nullopt;  // no usable timeline: GPU time only
}

std::optional<double> HostScaleFor(const v1::Trace& trace) { return *HostScaleFor(trace, nullptr); }

TraceFacts FactsOf(const v1::Trace& trace) {
  TraceFacts facts;
  facts.operations.reserve(static_cast<size_t>(trace.operations_size()));
  for (const Operation& op : trace.operations()) facts.operations.push_back(FactsOf(op));
  facts.replay = PlanReplay(trace);
  return facts;
}

absl::StatusOr<DevicePrediction> PredictOnDeviceWith(
    const v1::Trace& trace, const TraceFacts& facts, const DeviceSpec& origin,
    const DeviceSpec& target, std::optional<double> host_scale, const VaryingPassTable* varying,
    const StopCondition* stop) {
  if (stop == nullptr) stop = &StopCondition::Never();
  DevicePrediction prediction;
  prediction.set_device_id(target.id());
  prediction.set_display_name(target.display_name());
  const bool is_origin = origin.id() == target.id();
  prediction.set_is_origin(is_origin);

  std::vector<double> pass_scale;
  pass_scale.reserve(2 * trace.operations_size() + 1);
  DeviceSums sums;
  WarningTally tally;
  for (int i = 0; i < trace.operations_size(); ++i) {
    if (i % kOperationsPerStopCheck == 0) {
      HABITAT_RETURN_IF_ERROR(stop->Check("predicting ", target.id()));
    }
    VaryingNotes notes;
    OperationPrediction op =
        PredictOperation(trace, trace.operations(i), static_cast<uint32_t>(i), facts.operations[i],
                         origin, target, is_origin, varying, &notes);
    const Nanoseconds origin_ns = op.origin_forward_ns() + op.origin_backward_ns();
    sums.origin = SaturatingAdd(sums.origin, origin_ns);
    sums.predicted = SaturatingAdd(
        sums.predicted, SaturatingAdd(op.predicted_forward_ns(), op.predicted_backward_ns()));
    tally.Add(op, notes);
    pass_scale.push_back(Ratio(op.predicted_forward_ns(), op.origin_forward_ns()));
    pass_scale.push_back(Ratio(op.predicted_backward_ns(), op.origin_backward_ns()));
    AddToTotals(op, &prediction);
    *prediction.add_operations() = std::move(op);
  }
  HABITAT_ASSIGN_OR_RETURN(
      const double unattributed_scale,
      PredictUnattributed(trace, origin, target, is_origin, *stop, &sums, &prediction));
  pass_scale.push_back(unattributed_scale);
  SetGpuTime(sums.predicted, &prediction);
  prediction.set_expected_error_percent(IterationExpectedErrorPercent(prediction));
  HABITAT_RETURN_IF_ERROR(stop->Check("replaying the host timeline for ", target.id()));
  if (!host_scale.has_value()) host_scale = HostScaleFor(trace);
  if (host_scale.has_value()) {
    PredictWallTime(trace, *facts.replay, pass_scale, *host_scale, &prediction);
  }
  SetWallTime(&prediction);
  if (auto profiled = is_origin ? ProfiledHostTimelineWarning(trace) : std::nullopt) {
    AddDeviceWarning(profiled->kind, std::move(profiled->text), &prediction);
  }
  tally.Write(origin, target, sums.origin, &prediction);
  return prediction;
}

absl::StatusOr<DevicePrediction> PredictOnDevice(const v1::Trace& trace, const DeviceSpec& origin,
                                                 const DeviceSpec& target,
                                                 std::optional<double> host_scale,
                                                 const VaryingPassTable* varying,
                                                 const StopCondition* stop) {
  return PredictOnDeviceWith(trace, FactsOf(trace), origin, target, host_scale, varying, stop);
}

}  // namespace habitat
