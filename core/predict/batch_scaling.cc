#include "core/predict/batch_scaling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/time_units.h"
#include "core/predict/batch_dimension.h"
#include "core/trace/op_classification.h"

namespace habitat {
namespace {

using Shape = std::vector<int64_t>;
using ShapeField = google::protobuf::RepeatedField<int64_t>;

}  // namespace

absl::flat_hash_set<std::vector<int64_t>> ParameterShapes(const v1::Trace& trace) {
  absl::flat_hash_set<Shape> shapes;
  for (const v1::Operation& op : trace.operations()) {
    if (!IsAccumulateGrad(op)) continue;
    for (const v1::Argument& arg : op.arguments()) {
      if (arg.has_tensor())
        shapes.emplace(arg.tensor().shape().begin(), arg.tensor().shape().end());
    }
  }
  return shapes;
}

namespace {

// Work whose size follows the parameters, not the batch.
bool IsParameterSized(const v1::Operation& op) {
  return IsAccumulateGrad(op) || IsOptimizerStep(op);
}

// The dimension of `shape` that holds the batch (see the header), or -1.
int BatchDimension(const ShapeField& shape, int64_t batch,
                   const absl::flat_hash_set<Shape>& parameters) {
  return habitat::BatchDimension(shape, batch, [&](const ShapeField& s) {
    return parameters.contains(Shape(s.begin(), s.end()));
  });
}

enum class OpScaling { kScaled, kFixed, kUnknown };

// Dimension `d` of `shape`, a multiple of `batch`, as the same multiple of
// `target`; INVALID_ARGUMENT where that does not fit an int64.
absl::Status Rescale(ShapeField* shape, int d, int64_t batch, int64_t target,
                     const std::string& op_name) {
  const int64_t multiple = shape->Get(d) / batch;
  if (multiple > std::numeric_limits<int64_t>::max() / target) {
    return absl::InvalidArgumentError(absl::StrCat("an input of ", op_name, " has dimension ",
                                                   shape->Get(d), ", too large to scale to batch ",
                                                   target));
  }
  shape->Set(d, multiple * target);
  return absl::OkStatus();
}

// How the operation's device work scales with the batch: with it when a
// tensor input carries it (or, for a factory operation such as randn or
// zeros, its size list does), fixed when it is parameter-sized or its
// tensors do not, unknown when it has no tensors to tell.
OpScaling Classify(const v1::Operation& op, int64_t batch,
                   const absl::flat_hash_set<Shape>& parameters) {
  if (IsParameterSized(op)) return OpScaling::kFixed;
  bool any_tensor = false;
  for (const v1::Argument& arg : op.arguments()) {
    if (!arg.has_tensor()) continue;
    any_tensor = true;
    if (BatchDimension(arg.tensor().shape(), batch, parameters) >= 0) return OpScaling::kScaled;
  }
  if (any_tensor) return OpScaling::kFixed;
  for (const v1::Argument& arg : op.arguments()) {
    if (!arg.has_integers() || arg.integers().values().empty()) continue;
    if (BatchDimension(arg.integers().values(), batch, parameters) == 0) return OpScaling::kScaled;
  }
  return OpScaling::kUnknown;
}

// Gives the operation's batch-carrying inputs (Classify's) the target
// batch; returns how its device work scales.
absl::StatusOr<OpScaling> ScaleInputs(v1::Operation* op, int64_t batch, int64_t target,
                                      const absl::flat_hash_set<Shape>& parameters) {
  const OpScaling scaling = Classify(*op, batch, parameters);
  if (scaling != OpScaling::kScaled) return scaling;
  bool any_tensor = false;
  for (v1::Argument& arg : *op->mutable_arguments()) {
    if (!arg.has_tensor()) continue;
    any_tensor = true;
    ShapeField* shape = arg.mutable_tensor()->mutable_shape();
    const int d = BatchDimension(*shape, batch, parameters);
    if (d >= 0) HABITAT_RETURN_IF_ERROR(Rescale(shape, d, batch, target, op->name()));
  }
  if (any_tensor) return scaling;
  for (v1::Argument& arg : *op->mutable_arguments()) {
    if (!arg.has_integers() || arg.integers().values().empty()) continue;
    ShapeField* sizes = arg.mutable_integers()->mutable_values();
    if (BatchDimension(*sizes, batch, parameters) == 0) {
      HABITAT_RETURN_IF_ERROR(Rescale(sizes, 0, batch, target, op->name()));
      return scaling;
    }
  }
  return scaling;
}

Nanoseconds ScaleDuration(Nanoseconds t, double ratio, Nanoseconds fixed) {
  const Nanoseconds t0 = std::min(t, fixed);
  return t0 + std::llround(static_cast<double>(t - t0) * ratio);
}

// A copy's bytes at `ratio` times the batch. Saturates: a validated trace
// bounds times, not byte counts.
void ScaleBytes(v1::MemoryActivity* copy, double ratio) {
  const double bytes = std::round(static_cast<double>(copy->bytes()) * ratio);
  copy->set_bytes(bytes >= 1.8e19 ? std::numeric_limits<uint64_t>::max()
                                  : static_cast<uint64_t>(bytes));
}

// Scales the pass's kernels and copies; the pass's times follow their sum.
void ScalePass(v1::Pass* pass, double ratio, Nanoseconds fixed) {
  Nanoseconds before = 0, after = 0;
  for (v1::Kernel& kernel : *pass->mutable_kernels()) {
    before += kernel.duration_ns();
    kernel.set_duration_ns(ScaleDuration(kernel.duration_ns(), ratio, fixed));
    after += kernel.duration_ns();
  }
  for (v1::MemoryActivity& copy : *pass->mutable_memory()) {
    before += copy.duration_ns();
    ScaleBytes(&copy, ratio);
    copy.set_duration_ns(ScaleDuration(copy.duration_ns(), ratio, kBatchFixedOtherNs));
    after += copy.duration_ns();
  }
  if (before == 0) return;
  const double factor = static_cast<double>(after) / static_cast<double>(before);
  pass->set_time_ns(std::llround(static_cast<double>(pass->time_ns()) * factor));
  pass->set_rerun_time_ns(std::llround(static_cast<double>(pass->rerun_time_ns()) * factor));
}

Nanoseconds DeviceTime(const v1::Pass& pass) {
  Nanoseconds total = 0;
  for (const v1::Kernel& kernel : pass.kernels()) total += kernel.duration_ns();
  for (const v1::MemoryActivity& copy : pass.memory()) total += copy.duration_ns();
  return total;
}

// Moves a pass measured at `traced` to `target` by its re-runs (see the
// header): every kernel and copy in proportion; false, changing nothing,
// when the traced batch was not re-run, the target is outside the re-run
// batches or the pass has no device time.
bool ScalePassByReruns(v1::Pass* pass, uint32_t traced, uint32_t target, double ratio) {
  const auto at_traced = std::find_if(pass->batch_reruns().begin(), pass->batch_reruns().end(),
                                      [traced](const v1::BatchRerun& r) {
                                        return r.batch_size() == traced && r.rerun_time_ns() > 0;
                                      });
  if (at_traced == pass->batch_reruns().end()) return false;
  const std::optional<double> at_target = RerunAtBatch(*pass, target);
  const double traced_ns = static_cast<double>(DeviceTime(*pass));
  if (!at_target.has_value() || traced_ns <= 0) return false;
  const double rerun_ns = static_cast<double>(at_traced->rerun_time_ns());
  // What the iteration gains on the lone re-run (warm caches, no launch
  // gaps) shrinks with the work but never grows with it; what it loses
  // (contention) stays as it was.
  const double gain = rerun_ns - traced_ns;
  const double after =
      std::max(0.0, *at_target - (gain > 0 ? gain * std::min(1.0, *at_target / rerun_ns) : gain));
  const double factor = after / traced_ns;
  for (v1::Kernel& kernel : *pass->mutable_kernels()) {
    kernel.set_duration_ns(std::llround(static_cast<double>(kernel.duration_ns()) * factor));
  }
  for (v1::MemoryActivity& copy : *pass->mutable_memory()) {
    copy.set_duration_ns(std::llround(static_cast<double>(copy.duration_ns()) * factor));
    ScaleBytes(&copy, ratio);
  }
  pass->set_time_ns(std::llround(static_cast<double>(pass->time_ns()) * factor));
  pass->set_rerun_time_ns(std::llround(*at_target));
  return true;
}

Nanoseconds DeviceTime(const v1::Operation& op) {
  return DeviceTime(op.forward()) + (op.has_backward() ? DeviceTime(op.backward()) : 0);
}

absl::Status CheckBatchSizes(uint32_t traced, uint32_t target) {
  if (traced == 0) {
    return absl::InvalidArgumentError(
        "the trace does not record its batch size, so it cannot be predicted at another one; "
        "set the trace's batch_size (CLI: --traced-batch-size for torch.profiler traces)");
  }
  const double ratio = static_cast<double>(target) / traced;
  if (target == 0 || ratio > kMaxBatchScale || ratio < 1 / kMaxBatchScale) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size ", target, " is out of range for a trace at batch ", traced,
                     ": predictions go from 1/", kMaxBatchScale, " to ", kMaxBatchScale,
                     " times the traced batch (kernels change and memory runs out beyond)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BatchScaledTrace> ScaleTraceToBatch(const v1::Trace& trace, uint32_t batch_size) {
  if (absl::Status checked = CheckBatchSizes(trace.batch_size(), batch_size); !checked.ok()) {
    return checked;
  }
  BatchScaledTrace out;
  out.trace = trace;
  out.ratio = static_cast<double>(batch_size) / trace.batch_size();
  const absl::flat_hash_set<Shape> parameters = ParameterShapes(trace);
  Nanoseconds total = 0, unscaled = 0, after = 0, varying_time = 0, rerun_time = 0;
  for (v1::Operation& op : *out.trace.mutable_operations()) {
    const Nanoseconds time = DeviceTime(op);
    total += time;
    HABITAT_ASSIGN_OR_RETURN(const OpScaling scaling,
                             ScaleInputs(&op, trace.batch_size(), batch_size, parameters));
    if (scaling == OpScaling::kScaled) {
      const bool varying = IsKernelVaryingOperation(op);
      const Nanoseconds fixed = varying ? kBatchFixedKernelVaryingNs : kBatchFixedOtherNs;
      for (v1::Pass* pass :
           {op.mutable_forward(), op.has_backward() ? op.mutable_backward() : nullptr}) {
        if (pass == nullptr) continue;
        const Nanoseconds traced_time = DeviceTime(*pass);
        if (varying) varying_time += traced_time;
        if (varying && ScalePassByReruns(pass, trace.batch_size(), batch_size, out.ratio)) {
          rerun_time += traced_time;
        } else {
          ScalePass(pass, out.ratio, fixed);
        }
      }
    } else if (scaling == OpScaling::kUnknown && time > 0) {
      unscaled += time;
      out.unscaled_operations.push_back(op.name());
    }
    after += DeviceTime(op);
  }
  const Nanoseconds busy_change = after - total;
  for (const v1::Kernel& kernel : trace.unattributed_kernels()) {
    total += kernel.duration_ns();
    unscaled += kernel.duration_ns();
  }
  out.unscaled_share = total > 0 ? static_cast<double>(unscaled) / total : 0;
  out.rerun_share = varying_time > 0 ? static_cast<double>(rerun_time) / varying_time : 0;
  out.has_kernel_varying = varying_time > 0;
  out.trace.set_batch_size(batch_size);
  // The GPU-busy time grows with the device time; a GPU-bound iteration's
  // wall time with it (the engine calibrates its host model on the traced
  // iteration, not on these).
  if (trace.iteration_gpu_busy_ns() > 0) {
    out.trace.set_iteration_gpu_busy_ns(
        std::max<Nanoseconds>(0, trace.iteration_gpu_busy_ns() + busy_change));
  }
  if (trace.iteration_wall_ns() > 0) {
    out.trace.set_iteration_wall_ns(
        std::max(out.trace.iteration_gpu_busy_ns(), trace.iteration_wall_ns() + busy_change));
  }
  return out;
}

std::vector<bool> BatchCarryingOperations(const v1::Trace& trace,
                                          const absl::flat_hash_set<Shape>& parameters) {
  std::vector<bool> carrying(trace.operations_size(), false);
  if (trace.batch_size() == 0) return carrying;
  for (int i = 0; i < trace.operations_size(); ++i) {
    carrying[i] =
        Classify(trace.operations(i), trace.batch_size(), parameters) == OpScaling::kScaled;
  }
  return carrying;
}

void MarkBatchScaled(const BatchScaledTrace& scaled, v1::DevicePrediction* prediction) {
  const auto relabel = [](v1::PredictionMethod* method) {
    if (*method == v1::PREDICTION_METHOD_MEASURED) *method = v1::PREDICTION_METHOD_BATCH_SCALED;
  };
  for (v1::OperationPrediction& op : *prediction->mutable_operations()) {
    v1::PredictionMethod method = op.method();
    relabel(&method);
    op.set_method(method);
  }
  for (v1::MethodTotal& total : *prediction->mutable_method_totals()) {
    v1::PredictionMethod method = total.method();
    relabel(&method);
    total.set_method(method);
  }
  prediction->set_expected_error_percent(
      prediction->expected_error_percent() +
      BatchScalingErrorPercent(scaled.ratio, scaled.rerun_share));
}

std::vector<KindedWarning> BatchScalingWarnings(const BatchScaledTrace& scaled,
                                                uint32_t traced_batch) {
  std::vector<KindedWarning> warnings;
  const auto add = [&warnings](const char* kind, std::string text) {
    warnings.push_back(KindedWarning{kind, std::move(text), {}});
  };
  const std::string reruns =
      scaled.rerun_share > 0 ? absl::StrFormat(
                                   " (%.0f%% of the kernel-varying time instead by its re-runs at "
                                   "other batches on the origin GPU)",
                                   100 * scaled.rerun_share)
                             : "";
  add(warning_kind::kBatchScaled,
      absl::StrFormat(
          "predicted at batch %u from a trace at batch %u: each operation that carries the batch "
          "had its kernel times scaled by %.3g beyond a fixed part per kernel%s, on the origin GPU "
          "as on the others (about %.0f%% more expected error%s)",
          scaled.trace.batch_size(), traced_batch, scaled.ratio, reruns,
          BatchScalingErrorPercent(scaled.ratio, scaled.rerun_share),
          scaled.ratio > 4 || scaled.ratio < 0.5 ? "; ratios beyond 1/2 and 4 were not evaluated"
                                                 : ""));
  if (scaled.has_kernel_varying && scaled.rerun_share == 0) {
    // The same for every batch, so that a --fit sweep says it once.
    add(warning_kind::kNoBatchReruns,
        absl::StrFormat(
            "the trace holds no re-runs at other batches for its GEMMs, convolutions, RNNs and "
            "attention, whose libraries choose other kernels at another batch: the agent's "
            "tracker.measure_batch_scaling(), called after tracking, measures them there on the "
            "origin GPU (about %.1f%% instead of %.1f%% expected error per doubling of the batch)",
            BatchScalingErrorPercent(2, 1), BatchScalingErrorPercent(2, 0)));
  }
  if (scaled.unscaled_share > 0) {
    absl::flat_hash_set<std::string> seen;
    std::vector<std::string> names;
    for (const std::string& name : scaled.unscaled_operations) {
      if (seen.insert(name).second && names.size() < 5) names.push_back(name);
    }
    add(warning_kind::kBatchDimensionMissing,
        absl::StrFormat(
            "%.1f%% of the traced GPU time (%d operations%s%s) shows no batch dimension and keeps "
            "its traced time at batch %u",
            100 * scaled.unscaled_share, static_cast<int>(scaled.unscaled_operations.size()),
            names.empty() ? " and unattributed kernels" : ": ", absl::StrJoin(names, ", "),
            scaled.trace.batch_size()));
  }
  return warnings;
}

double BatchScalingErrorPercent(double r, double rerun_share) {
  // Fitted in docs/batch_scaling_study.md (the re-run section), which owns
  // the measurements behind them.
  constexpr double kPerDoubling = 4.5;
  constexpr double kPerDoublingFromReruns = 2.2;
  const double share = std::clamp(rerun_share, 0.0, 1.0);
  const double per_doubling = kPerDoubling + (kPerDoublingFromReruns - kPerDoubling) * share;
  return r > 0 ? per_doubling * std::abs(std::log2(r)) : 0;
}

std::optional<double> RerunAtBatch(const v1::Pass& pass, uint32_t batch) {
  // The nearest measured batches at or below and at or above `batch`.
  const v1::BatchRerun* below = nullptr;
  const v1::BatchRerun* above = nullptr;
  for (const v1::BatchRerun& rerun : pass.batch_reruns()) {
    if (rerun.batch_size() == 0 || rerun.rerun_time_ns() <= 0) continue;
    if (rerun.batch_size() <= batch &&
        (below == nullptr || rerun.batch_size() > below->batch_size())) {
      below = &rerun;
    }
    if (rerun.batch_size() >= batch &&
        (above == nullptr || rerun.batch_size() < above->batch_size())) {
      above = &rerun;
    }
  }
  if (below == nullptr || above == nullptr) return std::nullopt;
  if (below == above) return static_cast<double>(below->rerun_time_ns());
  const double position = std::log(static_cast<double>(batch) / below->batch_size()) /
                          std::log(static_cast<double>(above->batch_size()) / below->batch_size());
  return std::exp(std::log(static_cast<double>(below->rerun_time_ns())) +
                  position * std::log(static_cast<double>(above->rerun_time_ns()) /
                                      static_cast<double>(below->rerun_time_ns())));
}

}  // namespace habitat
