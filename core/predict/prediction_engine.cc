#include "core/predict/prediction_engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/time_units.h"
#include "core/mlp/features.h"
#include "core/predict/batch_scaling.h"
#include "core/predict/ddp_prediction.h"
#include "core/predict/expected_error.h"
#include "core/predict/host_replay.h"
#include "core/predict/memory_prediction.h"
#include "core/predict/op_traffic.h"
#include "core/predict/varying_predictor.h"
#include "core/scaling/wave_scaling.h"
#include "core/trace/math_mode.h"
#include "core/trace/op_classification.h"
#include "core/trace/trace_id.h"
#include "core/trace/trace_validation.h"

namespace habitat {
namespace {

using habitat::v1::DevicePrediction;
using habitat::v1::DeviceSpec;
using habitat::v1::MemoryActivity;
using habitat::v1::Operation;
using habitat::v1::OperationPrediction;
using habitat::v1::Pass;

// Predicted times saturate instead of overflowing: a valid but extreme
// trace (a long pass whose recorded kernels sum to a few ns) scales by a
// huge ratio, and llround beyond int64 gives an unspecified, negative value.
Nanoseconds SaturatingRound(double ns) {
  constexpr double kMax = static_cast<double>(std::numeric_limits<Nanoseconds>::max());
  if (!(ns < kMax)) return std::numeric_limits<Nanoseconds>::max();  // also NaN
  return ns > 0 ? static_cast<Nanoseconds>(std::llround(ns)) : 0;
}

Nanoseconds SaturatingAdd(Nanoseconds a, Nanoseconds b) {
  Nanoseconds sum;
  if (__builtin_add_overflow(a, b, &sum)) return std::numeric_limits<Nanoseconds>::max();
  return sum;
}

// Result of scaling one forward or backward pass.
struct ScaledPass {
  Nanoseconds predicted_ns = 0;
  // Kernels that could not be scaled and were carried over.
  int unscaled_kernels = 0;
  std::string first_error;
};

Nanoseconds ScaleMemory(const MemoryActivity& memory, const DeviceSpec& origin,
                        const DeviceSpec& target) {
  switch (memory.kind()) {
    case MemoryActivity::KIND_MEMCPY_DTOD:
    case MemoryActivity::KIND_MEMSET:
      // Device memory traffic: bound by DRAM bandwidth.
      return static_cast<Nanoseconds>(
          std::llround(static_cast<double>(memory.duration_ns()) * origin.memory_bandwidth_gbps() /
                       target.memory_bandwidth_gbps()));
    default:
      // Host transfers are bound by the host link, which we assume unchanged.
      return memory.duration_ns();
  }
}

// The measured pass time is scaled by the ratio of predicted to measured
// device activity, so launch gaps inside an op (when the time comes from
// CUDA events around a re-run) scale with it rather than vanish.
// `estimated_bytes` (kernel-alike ops of traces without counters): the
// pass's estimated DRAM bytes, shared among its kernels by duration, stand in
// for counters so that ScaleKernel can tell memory-bound kernels from others.
// `options` may fix gamma (see PredictOperation).
ScaledPass ScalePass(const Pass& pass, const DeviceSpec& origin, const DeviceSpec& target,
                     std::optional<uint64_t> estimated_bytes = std::nullopt,
                     const ScalingOptions& options = {}) {
  ScaledPass result;
  Nanoseconds measured = 0;
  Nanoseconds predicted = 0;
  double kernel_total_ns = 0;
  for (const auto& kernel : pass.kernels()) {
    kernel_total_ns += static_cast<double>(std::max<Nanoseconds>(kernel.duration_ns(), 0));
  }
  ScalingOptions kernel_options = options;
  for (const auto& kernel : pass.kernels()) {
    measured += kernel.duration_ns();
    kernel_options.estimated_dram_bytes.reset();
    if (estimated_bytes.has_value() && kernel_total_ns > 0 && kernel.duration_ns() > 0) {
      kernel_options.estimated_dram_bytes =
          static_cast<uint64_t>(static_cast<double>(*estimated_bytes) *
                                static_cast<double>(kernel.duration_ns()) / kernel_total_ns);
    }
    auto scaled = ScaleKernel(kernel, origin, target, kernel_options);
    if (scaled.ok()) {
      predicted += scaled->predicted_ns;
    } else {
      predicted += kernel.duration_ns();
      if (result.unscaled_kernels++ == 0) {
        result.first_error = std::string(scaled.status().message());
      }
    }
  }
  for (const auto& memory : pass.memory()) {
    measured += memory.duration_ns();
    predicted += ScaleMemory(memory, origin, target);
  }
  if (measured > 0 && pass.time_ns() > 0) {
    result.predicted_ns =
        SaturatingRound(static_cast<double>(pass.time_ns()) * static_cast<double>(predicted) /
                        static_cast<double>(measured));
  } else if (measured > 0) {
    result.predicted_ns = predicted;
  } else {
    result.predicted_ns = pass.time_ns();
  }
  return result;
}

std::string PassName(const Operation& op) {
  if (!op.name().empty()) return op.name();
  return op.backward().recorded_name();
}

// What PredictOperation reads from an operation whatever the target GPU:
// worked out once per trace, not once per GPU (docs/benchmarks.md, cold
// predictions).
struct OperationFacts {
  bool varying = false;
  // EstimatePassDramBytes of the forward [0] and backward [1] pass.
  std::optional<uint64_t> dram_bytes[2];
};

OperationFacts FactsOf(const Operation& op) {
  OperationFacts facts;
  facts.varying = IsKernelVaryingOperation(op);
  facts.dram_bytes[0] = EstimatePassDramBytes(op, false);
  facts.dram_bytes[1] = EstimatePassDramBytes(op, true);
  return facts;
}

// What the device-level warnings need to know about a kernel-varying op
// beyond its OperationPrediction.
struct VaryingNotes {
  // The math modes on the origin and on the target, where known (the model
  // predicted a pass, or the op has a signature the features understand).
  std::optional<MathMode> origin_mode;
  std::optional<MathMode> target_mode;
  // A pass came from the model without training data on that side.
  bool target_outside_training = false;
  bool origin_outside_training = false;
  // A pass was predicted on this trained GPU with the target's chip.
  std::string sibling;
  // A pass was a large GEMM on fp32 tensors on the target, predicted in
  // large_gemm_mode (fp32 or TF32); one was lowered to the large-GEMM
  // ceiling; a TF32 one was lowered to its fp32 prediction.
  bool large_gemm = false;
  MathMode large_gemm_mode = MathMode::kFp32;
  bool capped_at_ceiling = false;
  bool fp32_bound = false;
};

// A kernel-varying op with a trained predictor: each pass the table covers
// comes from the model; the others (no signature the model covers, or too
// short to be anything but launch latency) are wave-scaled kernel by kernel,
// and, where the op has a signature, kept at or above the target's floor so
// that no prediction beats the target's peak FLOPS or bandwidth.
void PredictVaryingOperation(const v1::Trace& trace, const Operation& op, uint32_t index,
                             const OperationFacts& facts, const DeviceSpec& origin,
                             const DeviceSpec& target, const VaryingPassTable& table,
                             OperationPrediction* out, VaryingNotes* notes) {
  int from_model = 0;
  bool all_trained = true;
  bool at_limit = false;
  ExpectedErrorMean error;
  for (bool backward : {false, true}) {
    if (backward && !op.has_backward()) continue;
    Nanoseconds predicted;
    double pass_error;
    auto it = table.find(VaryingPassKey(static_cast<int>(index), backward));
    if (it != table.end()) {
      const VaryingPassPrediction& pass = it->second;
      ++from_model;
      all_trained = all_trained && pass.trained_on_target;
      if (pass.sibling_id.empty()) {
        notes->target_outside_training |= !pass.target_in_training;
      } else {
        notes->sibling = pass.sibling_id;
      }
      notes->origin_outside_training |= !pass.origin_in_training;
      notes->origin_mode = pass.origin_mode;
      notes->target_mode = pass.target_mode;
      at_limit = at_limit || pass.clamped_to_floor;
      if (pass.large_gemm) {
        notes->large_gemm = true;
        notes->large_gemm_mode = pass.fp32_bound ? MathMode::kFp32 : pass.target_mode;
      }
      notes->capped_at_ceiling |= pass.capped_at_ceiling;
      notes->fp32_bound |= pass.fp32_bound;
      predicted = pass.predicted_ns;
      pass_error = pass.expected_error_percent;
    } else {
      // Gamma from the bandwidth the pass achieves, as for kernel-alike
      // ops: without a byte estimate every kernel would count as
      // memory-bound and move by the bandwidth ratio alone.
      predicted = ScalePass(backward ? op.backward() : op.forward(), origin, target,
                            facts.dram_bytes[backward ? 1 : 0])
                      .predicted_ns;
      pass_error = kKernelVaryingWaveScaledErrorPercent;
      if (auto limit = VaryingPassLimitFor(trace, op, backward, origin, target)) {
        notes->origin_mode = limit->origin_mode;
        notes->target_mode = limit->target_mode;
        // A pass that took no time on the origin (nothing recorded) stays 0.
        if (predicted > 0 && predicted < limit->floor_ns) {
          predicted = limit->floor_ns;
          at_limit = true;
        }
      }
    }
    error.Add(predicted, pass_error);
    if (backward) {
      out->set_predicted_backward_ns(predicted);
    } else {
      out->set_predicted_forward_ns(predicted);
    }
  }
  if (notes->origin_mode.has_value()) {
    out->set_origin_math_mode(std::string(MathModeName(*notes->origin_mode)));
    out->set_target_math_mode(std::string(MathModeName(*notes->target_mode)));
  }
  out->set_at_hardware_limit(at_limit);
  out->set_expected_error_percent(error.percent());
  if (from_model > 0) {
    out->set_method(v1::PREDICTION_METHOD_MLP);
    out->set_predictor_trained_on_target(all_trained);
    return;
  }
  out->set_method(v1::PREDICTION_METHOD_WAVE_SCALING);
  if (out->origin_forward_ns() + out->origin_backward_ns() > 0) {
    out->add_warnings(
        absl::StrCat(out->name(),
                     " has no configuration the kernel-varying predictor covers (or only "
                     "launch-bound passes); its kernels were wave-scaled, which is less "
                     "accurate across GPU architectures"));
  }
}

// `trace`: the trace `op` belongs to (kernel-varying ops read its math
// settings). `notes` receives what the device warnings need about
// kernel-varying ops.
OperationPrediction PredictOperation(const v1::Trace& trace, const Operation& op, uint32_t index,
                                     const OperationFacts& facts, const DeviceSpec& origin,
                                     const DeviceSpec& target, bool is_origin,
                                     const VaryingPassTable* varying_table, VaryingNotes* notes) {
  OperationPrediction out;
  out.set_index(index);
  out.set_name(PassName(op));
  out.set_origin_forward_ns(op.forward().time_ns());
  out.set_origin_backward_ns(op.has_backward() ? op.backward().time_ns() : 0);
  if (is_origin) {
    out.set_method(v1::PREDICTION_METHOD_MEASURED);
    out.set_predicted_forward_ns(out.origin_forward_ns());
    out.set_predicted_backward_ns(out.origin_backward_ns());
    return out;
  }
  const bool varying = facts.varying;
  // Kernel-varying means "runs other kernels on another architecture". A GPU
  // that differs only in memory runs the same GEMM/convolution kernels on the
  // same SMs at the same clock: their work does not change (gamma 0), only
  // the per-launch fixed part does. Measured on the H100 <-> H200 fixtures
  // this beats the model trained across architectures (see docs/accuracy.md).
  const bool same_kernels = varying && SameComputeUnits(origin, target);
  if (varying && varying_table != nullptr && !same_kernels) {
    PredictVaryingOperation(trace, op, index, facts, origin, target, *varying_table, &out, notes);
    return out;
  }
  if (varying && !same_kernels) {
    out.set_method(v1::PREDICTION_METHOD_UNSCALED);
    out.set_predicted_forward_ns(out.origin_forward_ns());
    out.set_predicted_backward_ns(out.origin_backward_ns());
    if (out.origin_forward_ns() + out.origin_backward_ns() > 0) {
      out.set_expected_error_percent(kUnscaledErrorPercent);
    }
    out.add_warnings(
        absl::StrCat(out.name(),
                     " runs architecture-specific kernels (cuDNN/cuBLAS) and no "
                     "trained predictor is available yet; origin time carried over unscaled"));
    return out;
  }
  ScaledPass forward;
  ScaledPass backward;
  if (same_kernels) {
    ScalingOptions compute_bound;
    compute_bound.gamma_override = 0.0;
    forward = ScalePass(op.forward(), origin, target, std::nullopt, compute_bound);
    if (op.has_backward()) {
      backward = ScalePass(op.backward(), origin, target, std::nullopt, compute_bound);
    }
  } else {
    forward = ScalePass(op.forward(), origin, target, facts.dram_bytes[0]);
    if (op.has_backward()) {
      backward = ScalePass(op.backward(), origin, target, facts.dram_bytes[1]);
    }
  }
  out.set_predicted_forward_ns(forward.predicted_ns);
  out.set_predicted_backward_ns(backward.predicted_ns);
  const bool has_kernels = op.forward().kernels_size() + op.forward().memory_size() +
                               op.backward().kernels_size() + op.backward().memory_size() >
                           0;
  if (!has_kernels) {
    out.set_method(v1::PREDICTION_METHOD_UNSCALED);
    // Nothing ran on the GPU and nothing is predicted: no error to expect.
    if (out.origin_forward_ns() + out.origin_backward_ns() > 0) {
      out.set_expected_error_percent(kUnscaledErrorPercent);
      out.add_warnings(absl::StrCat(out.name(),
                                    " has a measured time but no recorded kernels; "
                                    "carried over unscaled"));
    }
    return out;
  }
  out.set_method(v1::PREDICTION_METHOD_WAVE_SCALING);
  out.set_expected_error_percent(SameComputeUnits(origin, target) ? kSameComputeUnitsErrorPercent
                                                                  : kKernelAlikeErrorPercent);
  const int unscaled = forward.unscaled_kernels + backward.unscaled_kernels;
  if (unscaled > 0) {
    out.add_warnings(
        absl::StrCat(unscaled, " kernel(s) of ", out.name(), " carried over unscaled: ",
                     forward.first_error.empty() ? backward.first_error : forward.first_error));
  }
  return out;
}

// Operations of one kind of device warning and their origin time.
struct OpShare {
  int operations = 0;
  Nanoseconds origin_ns = 0;
  void Add(Nanoseconds ns) {
    ++operations;
    origin_ns = SaturatingAdd(origin_ns, ns);
  }
};

// Index into per-mode tables (features.h asserts kAllMathModes' order).
size_t ModeIndex(MathMode mode) { return static_cast<size_t>(mode); }

// Mode names for people: "TF32" as NVIDIA writes it, the others as
// MathModeName.
std::string DisplayModeName(MathMode mode) {
  return mode == MathMode::kTf32 ? "TF32" : std::string(MathModeName(mode));
}

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
  prediction->set_wall_ns(target->wall_ns);
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

// What an instance bills: the replayed wall time, or the GPU time where the
// trace has no host timeline to replay.
void SetWallTime(DevicePrediction* prediction) {
  const bool replayed = prediction->wall_ns() > 0;
  prediction->set_wall_time_ns(replayed ? prediction->wall_ns() : prediction->gpu_time_ns());
  prediction->set_wall_time_is_gpu_time(!replayed);
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

namespace {

// What predicting a trace on any GPU reads from it, worked out once.
struct TraceFacts {
  std::vector<OperationFacts> operations;  // one per operation
  std::shared_ptr<const ReplayPlan> replay;
};

TraceFacts FactsOf(const v1::Trace& trace) {
  TraceFacts facts;
  facts.operations.reserve(static_cast<size_t>(trace.operations_size()));
  for (const Operation& op : trace.operations()) facts.operations.push_back(FactsOf(op));
  facts.replay = PlanReplay(trace);
  return facts;
}

// PredictOnDevice with `facts` = FactsOf(trace).
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
  Nanoseconds total = 0;
  Nanoseconds origin_total = 0;
  Nanoseconds unscaled_origin = 0;
  int unscaled_ops = 0;
  // Device warnings, one per distinct case: index = MathMode (the origin's
  // mode for math-mode fallbacks and an origin outside the training data,
  // the target's for a target outside it).
  OpShare fallback[mlp::kMathModeCount];
  OpShare origin_untrained[mlp::kMathModeCount];
  OpShare target_untrained[mlp::kMathModeCount];
  OpShare at_limit;
  OpShare large_gemms[mlp::kMathModeCount];  // by the mode predicted in
  OpShare capped;
  OpShare fp32_bound;
  OpShare via_sibling;
  std::string sibling;
  for (int i = 0; i < trace.operations_size(); ++i) {
    if (i % kOperationsPerStopCheck == 0) {
      HABITAT_RETURN_IF_ERROR(stop->Check("predicting ", target.id()));
    }
    VaryingNotes notes;
    OperationPrediction op =
        PredictOperation(trace, trace.operations(i), static_cast<uint32_t>(i), facts.operations[i],
                         origin, target, is_origin, varying, &notes);
    const Nanoseconds origin_ns = op.origin_forward_ns() + op.origin_backward_ns();
    origin_total = SaturatingAdd(origin_total, origin_ns);
    total =
        SaturatingAdd(total, SaturatingAdd(op.predicted_forward_ns(), op.predicted_backward_ns()));
    if (op.method() == v1::PREDICTION_METHOD_UNSCALED && origin_ns > 0) {
      ++unscaled_ops;
      unscaled_origin += origin_ns;
    }
    if (notes.origin_mode.has_value() && *notes.origin_mode != *notes.target_mode) {
      fallback[ModeIndex(*notes.origin_mode)].Add(origin_ns);
    }
    if (op.method() == v1::PREDICTION_METHOD_MLP && notes.origin_outside_training) {
      origin_untrained[ModeIndex(*notes.origin_mode)].Add(origin_ns);
    }
    if (op.method() == v1::PREDICTION_METHOD_MLP && notes.target_outside_training) {
      target_untrained[ModeIndex(*notes.target_mode)].Add(origin_ns);
    }
    if (op.at_hardware_limit()) at_limit.Add(origin_ns);
    if (notes.large_gemm) large_gemms[ModeIndex(notes.large_gemm_mode)].Add(origin_ns);
    if (notes.fp32_bound) fp32_bound.Add(origin_ns);
    if (op.method() == v1::PREDICTION_METHOD_MLP && !notes.sibling.empty()) {
      via_sibling.Add(origin_ns);
      sibling = notes.sibling;
    }
    if (notes.capped_at_ceiling) capped.Add(origin_ns);
    pass_scale.push_back(Ratio(op.predicted_forward_ns(), op.origin_forward_ns()));
    pass_scale.push_back(Ratio(op.predicted_backward_ns(), op.origin_backward_ns()));
    AddToTotals(op, &prediction);
    *prediction.add_operations() = std::move(op);
  }
  double unattributed_scale = 1.0;
  if (trace.unattributed_kernels_size() > 0) {
    HABITAT_RETURN_IF_ERROR(stop->Check("predicting ", target.id()));
    // Kernels the capture could not tie to an op still take GPU time.
    v1::Operation loose;
    loose.set_name("(kernels not attributed to an operation)");
    *loose.mutable_forward()->mutable_kernels() = trace.unattributed_kernels();
    VaryingNotes notes;
    OperationPrediction op = PredictOperation(
        trace, loose, static_cast<uint32_t>(trace.operations_size()), FactsOf(loose), origin,
        target, is_origin, /*varying_table=*/nullptr, &notes);
    for (const auto& kernel : trace.unattributed_kernels()) {
      op.set_origin_forward_ns(op.origin_forward_ns() + kernel.duration_ns());
    }
    origin_total = SaturatingAdd(origin_total, op.origin_forward_ns());
    total = SaturatingAdd(total, op.predicted_forward_ns());
    unattributed_scale = Ratio(op.predicted_forward_ns(), op.origin_forward_ns());
    AddToTotals(op, &prediction);
    *prediction.add_operations() = std::move(op);
  }
  pass_scale.push_back(unattributed_scale);
  SetGpuTime(total, &prediction);
  prediction.set_expected_error_percent(IterationExpectedErrorPercent(prediction));
  HABITAT_RETURN_IF_ERROR(stop->Check("replaying the host timeline for ", target.id()));
  if (!host_scale.has_value()) host_scale = HostScaleFor(trace);
  if (host_scale.has_value()) {
    PredictWallTime(trace, *facts.replay, pass_scale, *host_scale, &prediction);
  }
  SetWallTime(&prediction);
  if (unscaled_ops > 0 && origin_total > 0) {
    prediction.add_warnings(absl::StrFormat(
        "%d operation(s), %.1f%% of the origin GPU time, were carried over unscaled "
        "(see the per-operation warnings with --breakdown)",
        unscaled_ops, 100.0 * static_cast<double>(unscaled_origin) / origin_total));
  }
  if (origin_total > 0) {
    auto percent = [origin_total](const OpShare& share) {
      return 100.0 * static_cast<double>(share.origin_ns) / static_cast<double>(origin_total);
    };
    for (MathMode mode : mlp::kAllMathModes) {
      const OpShare& share = fallback[ModeIndex(mode)];
      if (share.operations == 0) continue;
      // TargetMathMode's rule: a GPU without units of the mode runs fp32.
      // The text does not name the target (the prediction is the target's),
      // so clients can print one line for every GPU it applies to.
      prediction.add_warnings(absl::StrFormat(
          "%d operation(s), %.1f%% of the origin GPU time, ran in %s on %s and run in fp32 on "
          "the target GPU, which has no %s tensor cores",
          share.operations, percent(share), DisplayModeName(mode), origin.id(),
          DisplayModeName(mode)));
    }
    // One line per side the training data lacks, with the modes it lacks.
    struct Untrained {
      const OpShare* by_mode;
      const char* side;
      std::string gpu;
      const char* runs;
    };
    for (const Untrained& u : {Untrained{target_untrained, "target", "it", "run in there"},
                               Untrained{origin_untrained, "origin", origin.id(), "ran in"}}) {
      OpShare all;
      std::vector<std::string> modes;
      for (MathMode mode : mlp::kAllMathModes) {
        const OpShare& share = u.by_mode[ModeIndex(mode)];
        if (share.operations == 0) continue;
        all.operations += share.operations;
        all.origin_ns = SaturatingAdd(all.origin_ns, share.origin_ns);
        modes.push_back(absl::StrCat(DisplayModeName(mode), " for ", share.operations));
      }
      if (all.operations == 0) continue;
      prediction.add_warnings(absl::StrFormat(
          "%d operation(s), %.1f%% of the origin GPU time, were predicted by the kernel-varying "
          "model with the %s GPU outside its training data (their operator types were not "
          "measured on %s in the math mode they %s: %s); it extrapolated from the GPUs' specs, "
          "expect larger errors there",
          all.operations, percent(all), u.side, u.gpu, u.runs, absl::StrJoin(modes, ", ")));
    }
    if (via_sibling.operations > 0) {
      prediction.add_warnings(absl::StrFormat(
          "%d operation(s), %.1f%% of the origin GPU time, were predicted by the kernel-varying "
          "model on %s, which has this GPU's chip and is in its training data, and moved here "
          "by the ratio of the two GPUs' sustained rooflines (their clocks, power limits or "
          "memory differ)",
          via_sibling.operations, percent(via_sibling), sibling));
    }
    if (at_limit.operations > 0) {
      prediction.add_warnings(absl::StrFormat(
          "%d operation(s), %.1f%% of the origin GPU time, were predicted faster than the "
          "target GPU's datasheet peak FLOPS (in their math mode) or memory bandwidth allow, "
          "and were raised to that limit (at_hardware_limit)",
          at_limit.operations, percent(at_limit)));
    }
    for (MathMode mode : mlp::kAllMathModes) {
      const OpShare& share = large_gemms[ModeIndex(mode)];
      if (share.operations == 0 || mlp::MeasuredGemmTflops(target, mode) > 0) continue;
      prediction.add_warnings(absl::StrFormat(
          "%d operation(s), %.1f%% of the origin GPU time, are large %s GEMMs on the target "
          "GPU, moved by its sustained %s GEMM throughput, which no measurement gives for "
          "it: %.2f of its datasheet peak is assumed",
          share.operations, percent(share), DisplayModeName(mode), DisplayModeName(mode),
          mlp::kDefaultSustainedFraction));
    }
    if (capped.operations > 0) {
      prediction.add_warnings(absl::StrFormat(
          "%d operation(s), %.1f%% of the origin GPU time, are large GEMMs on the target "
          "GPU whose origin time, moved by the two GPUs' sustained GEMM throughputs, came out "
          "slower than the GPUs measured run such GEMMs (the kernel-varying model's large-GEMM "
          "ceiling times the target's sustained GEMM time in their mode); they were lowered to "
          "that ceiling",
          capped.operations, percent(capped)));
    }
    if (fp32_bound.operations > 0) {
      prediction.add_warnings(absl::StrFormat(
          "%d operation(s), %.1f%% of the origin GPU time, run in TF32 on the target GPU and "
          "were predicted slower there than in fp32; they take the fp32 prediction (the GPU's "
          "TF32 throughput is at least its fp32 one; the kernel-varying model has no TF32 "
          "measurements of any GPU but Hopper)",
          fp32_bound.operations, percent(fp32_bound)));
    }
  }
  if (target.test_only()) {
    prediction.add_warnings(
        absl::StrCat(target.id(), " is a test-only device entry, not a product"));
  }
  return prediction;
}

}  // namespace

absl::StatusOr<DevicePrediction> PredictOnDevice(const v1::Trace& trace, const DeviceSpec& origin,
                                                 const DeviceSpec& target,
                                                 std::optional<double> host_scale,
                                                 const VaryingPassTable* varying,
                                                 const StopCondition* stop) {
  return PredictOnDeviceWith(trace, FactsOf(trace), origin, target, host_scale, varying, stop);
}

void PriceAndRank(const v1::PriceCatalog* catalog, v1::PriceKind kind,
                  std::vector<DevicePrediction>* predictions) {
  for (auto& p : *predictions) {
    const double seconds = NsToSeconds(p.wall_time_ns());
    p.set_samples_per_second(seconds > 0 ? p.batch_size() / seconds : 0.0);
    p.set_has_price(false);
    p.clear_instance_type();
    p.clear_gpus_per_instance();
    p.clear_instance_description();
    p.clear_price_region();
    if (catalog == nullptr) continue;
    const v1::GpuPrice* row = ChoosePrice(*catalog, p.device_id(), kind);
    if (row == nullptr) continue;
    const double price = PricePerGpuHour(*row, kind);
    p.set_has_price(true);
    p.set_price_per_hour(price);
    p.set_instance_type(row->instance_type());
    p.set_gpus_per_instance(GpusPerInstance(*row));
    p.set_instance_description(row->instance_description());
    p.set_price_region(row->region());
    p.set_cost_per_1000_samples(
        p.samples_per_second() > 0 ? price / 3600.0 * 1000.0 / p.samples_per_second() : 0.0);
    p.set_samples_per_currency_unit(p.samples_per_second() * 3600.0 / price);
  }
  // A GPU the batch does not fit would run out of memory, not win.
  const auto ranked = [](const DevicePrediction& p) {
    return !p.has_memory() || p.memory().fits();
  };
  std::vector<size_t> order;
  for (size_t i = 0; i < predictions->size(); ++i) {
    (*predictions)[i].set_rank_by_time(0);
    (*predictions)[i].set_rank_by_cost(0);
    if (ranked((*predictions)[i])) order.push_back(i);
  }
  // By throughput: GPUs fitted to different batches compare by samples per
  // second, which at one batch orders as the wall time does. Where the host
  // sets the pace, several GPUs share one wall time; the one with less GPU
  // time has more headroom and comes first.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& pa = (*predictions)[a];
    const auto& pb = (*predictions)[b];
    return std::pair(-pa.samples_per_second(), pa.gpu_time_ns()) <
           std::pair(-pb.samples_per_second(), pb.gpu_time_ns());
  });
  for (size_t rank = 0; rank < order.size(); ++rank) {
    (*predictions)[order[rank]].set_rank_by_time(static_cast<uint32_t>(rank + 1));
  }
  std::vector<size_t> priced;
  for (size_t i = 0; i < predictions->size(); ++i) {
    const DevicePrediction& p = (*predictions)[i];
    if (p.has_price() && ranked(p)) priced.push_back(i);
  }
  std::stable_sort(priced.begin(), priced.end(), [&](size_t a, size_t b) {
    return (*predictions)[a].cost_per_1000_samples() < (*predictions)[b].cost_per_1000_samples();
  });
  for (size_t rank = 0; rank < priced.size(); ++rank) {
    (*predictions)[priced[rank]].set_rank_by_cost(static_cast<uint32_t>(rank + 1));
  }
}

namespace {

// Whether a cache entry can answer: one without the breakdown cannot
// answer a call that asks for it.
bool Answers(const CachedPrediction& entry, bool include_breakdown) {
  return include_breakdown ? entry.full != nullptr : entry.summary != nullptr;
}

// The breakdown is kept only when it was asked for: it is most of an
// entry's size and most calls do not read it.
CachedPrediction ForTheCache(DevicePrediction fresh, bool include_breakdown) {
  // Swapped out, not cleared: a cleared repeated field keeps its elements
  // allocated for reuse, so a "summary" would still hold the breakdown.
  google::protobuf::RepeatedPtrField<OperationPrediction> operations;
  operations.Swap(fresh.mutable_operations());
  CachedPrediction entry;
  if (!include_breakdown) {
    entry.summary = std::make_shared<const DevicePrediction>(std::move(fresh));
    return entry;
  }
  entry.summary = std::make_shared<const DevicePrediction>(fresh);
  fresh.mutable_operations()->Swap(&operations);
  entry.full = std::make_shared<const DevicePrediction>(std::move(fresh));
  return entry;
}

// Asked for spot prices where the catalog has only on-demand ones (some
// clouds have no spot market): those GPUs come back unpriced, which reads as
// "not offered" unless said.
std::optional<std::string> MissingSpotPricesWarning(
    const v1::PriceCatalog& catalog, const std::vector<DevicePrediction>& predictions) {
  std::vector<std::string> on_demand_only;
  for (const auto& p : predictions) {
    if (!p.has_price() &&
        ChoosePrice(catalog, p.device_id(), v1::PRICE_KIND_ON_DEMAND) != nullptr) {
      on_demand_only.push_back(p.device_id());
    }
  }
  if (on_demand_only.empty()) return std::nullopt;
  return absl::StrCat("catalog '", catalog.name(), "' has no spot price for ",
                      absl::StrJoin(on_demand_only, ", "),
                      " (on-demand prices only), so they are unpriced; ask for on-demand "
                      "prices to rank them by cost");
}

// Without a replayed host timeline the GPU time stands in for the wall time,
// which flatters any GPU the host would keep waiting.
std::optional<std::string> WallTimeFromGpuTimeWarning(
    const v1::Trace& trace, const std::vector<DevicePrediction>& predictions) {
  std::vector<std::string> unreplayed;
  for (const auto& p : predictions) {
    if (p.wall_time_is_gpu_time()) unreplayed.push_back(p.device_id());
  }
  if (unreplayed.empty()) return std::nullopt;
  const std::string which = unreplayed.size() == predictions.size()
                                ? std::string("any GPU")
                                : absl::StrJoin(unreplayed, ", ");
  return absl::StrCat(
      "no wall time could be predicted for ", which,
      HasHostTimeline(trace) ? " (the host timeline could not be replayed)"
                             : " (the trace has no host timeline)",
      ": throughput, cost and ranks take the GPU time as the wall time, as if the GPU never "
      "waited for the host");
}

}  // namespace

int64_t PredictionWorkPerDevice(const v1::Trace& trace) {
  int64_t work = int64_t{trace.operations_size()} + trace.unattributed_kernels_size() +
                 trace.host_events_size();
  for (const auto& op : trace.operations()) {
    work += op.forward().kernels_size() + op.forward().memory_size() +
            op.backward().kernels_size() + op.backward().memory_size();
  }
  return work;
}

PredictionEngine::PredictionEngine(const DeviceDatabase* devices,
                                   std::shared_ptr<PredictionCache> cache,
                                   std::shared_ptr<const VaryingPredictor> varying)
    : devices_(devices), cache_(std::move(cache)), varying_(std::move(varying)) {}

absl::StatusOr<const DeviceSpec*> PredictionEngine::ResolveOrigin(const v1::Trace& trace) const {
  if (!trace.origin().device_id().empty()) {
    const DeviceSpec* spec = devices_->Find(trace.origin().device_id());
    if (spec == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("origin.device_id '", trace.origin().device_id(),
                       "' is not in the GPU spec database; see ListDevices / `habitat devices`"));
    }
    return spec;
  }
  const DeviceSpec* spec = devices_->FindByDriverName(trace.origin().name());
  if (spec == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("origin GPU '", trace.origin().name(),
                     "' (origin.name) is not in the GPU spec database; set origin.device_id to "
                     "one of the ids from ListDevices / `habitat devices`"));
  }
  return spec;
}

namespace {
std::optional<std::string> OriginHostBoundWarning(const v1::Trace& traced) {
  if (traced.iteration_gpu_busy_ns() <= 0 || traced.iteration_wall_ns() <= 0 ||
      !IsHostBound(traced.iteration_gpu_busy_ns(), traced.iteration_wall_ns())) {
    return std::nullopt;
  }
  return absl::StrFormat(
      "the origin iteration was host-bound (GPU busy %.0f%% of wall time): the wall time "
      "predicted for each GPU replays the origin's host timeline, assuming a host as fast "
      "as the origin's; throughput, cost and ranks follow it",
      100.0 * static_cast<double>(traced.iteration_gpu_busy_ns()) /
          static_cast<double>(traced.iteration_wall_ns()));
}
}  // namespace

absl::StatusOr<std::vector<const DeviceSpec*>> PredictionEngine::ResolveTargets(
    const std::vector<std::string>& ids) const {
  std::vector<const DeviceSpec*> targets;
  if (ids.empty()) {
    for (const auto& spec : devices_->devices()) {
      if (!spec.test_only()) targets.push_back(&spec);
    }
    return targets;
  }
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!seen.insert(ids[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("devices[", i, "] '", ids[i], "' is listed more than once"));
    }
    HABITAT_ASSIGN_OR_RETURN(const DeviceSpec* spec, devices_->Get(ids[i]));
    targets.push_back(spec);
  }
  return targets;
}

namespace {

// One Predict's targets grouped by the batch each is predicted at: the
// request's (or the trace's) for all of them, or with a fit the largest
// batch that fits each GPU (the trace's where none does: it is reported not
// to fit).
struct BatchGroup {
  uint32_t batch = 0;
  std::vector<size_t> targets;  // indices into the resolved targets
};

// Each target's LargestFittingBatch (on the fit's grid, else powers of two),
// computed once for the grouping and the memory prediction; 0s without a
// memory model.
std::vector<uint32_t> LargestFittingBatches(const std::optional<MemoryModel>& memory,
                                            const PredictionQuery& query,
                                            const std::vector<const DeviceSpec*>& targets) {
  std::vector<uint32_t> largest(targets.size(), 0);
  if (!memory.has_value()) return largest;
  const uint32_t step = query.fit.has_value() ? query.fit->batch_step() : 0;
  for (size_t t = 0; t < targets.size(); ++t) {
    largest[t] = LargestFittingBatch(*memory, UsableMemoryBytes(*targets[t]), step);
  }
  return largest;
}

// `largest`: LargestFittingBatches, one entry per target.
std::vector<BatchGroup> GroupByBatch(const v1::Trace& traced, const PredictionQuery& query,
                                     const std::vector<uint32_t>& largest) {
  const uint32_t asked = query.batch_size != 0 ? query.batch_size : traced.batch_size();
  std::vector<BatchGroup> groups;
  for (size_t t = 0; t < largest.size(); ++t) {
    const uint32_t batch = query.fit.has_value() && largest[t] != 0 ? largest[t] : asked;
    auto group = std::find_if(groups.begin(), groups.end(),
                              [batch](const BatchGroup& g) { return g.batch == batch; });
    if (group == groups.end()) group = groups.insert(groups.end(), BatchGroup{batch, {}});
    group->targets.push_back(t);
  }
  return groups;
}

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1 << 30));
}

// Sets the prediction's batch and memory; a GPU the batch does not fit says
// so (PriceAndRank then leaves it unranked).
void AddMemory(const std::optional<MemoryModel>& memory, uint32_t batch, const DeviceSpec& target,
               uint32_t largest_fitting_batch, DevicePrediction* prediction) {
  prediction->set_batch_size(batch);
  if (!memory.has_value()) return;
  *prediction->mutable_memory() = PredictMemory(*memory, batch, target, largest_fitting_batch);
  const v1::MemoryPrediction& m = prediction->memory();
  if (m.fits()) return;
  prediction->add_warnings(absl::StrCat(
      "may run out of memory: batch ", batch, " needs about ", GiB(m.peak_allocated_bytes()),
      " (+-", absl::StrFormat("%.0f", m.expected_error_percent()),
      "%), and with headroom for that error more than the ", GiB(m.usable_bytes()),
      " this GPU leaves a process; ",
      m.largest_fitting_batch() == 0
          ? std::string("no batch fits")
          : absl::StrCat("the largest batch that fits is ", m.largest_fitting_batch()),
      "; it is not ranked"));
}

// Whether `configs` already asks for one node of `gpus`.
bool AsksForOneNodeOf(const std::vector<v1::ParallelConfig>& configs, uint32_t gpus) {
  return std::any_of(configs.begin(), configs.end(), [gpus](const v1::ParallelConfig& c) {
    return c.gpus_per_node() == gpus && c.nodes() <= 1;
  });
}

// DevicePrediction.parallel: the request's configurations, then one node of
// each other multi-GPU instance size the catalog offers this GPU in, with
// the request's bucket cap and NVLS setting (its first configuration's).
void AddParallel(const absl::StatusOr<TraceIteration>& iteration, const DeviceSpec& target,
                 const PredictionQuery& query, DevicePrediction* prediction) {
  std::vector<v1::ParallelConfig> configs = query.parallel;
  if (query.catalog_instances && query.catalog != nullptr) {
    v1::ParallelConfig node;
    if (!query.parallel.empty()) {
      node.set_bucket_cap_bytes(query.parallel.front().bucket_cap_bytes());
      node.set_disable_nvls(query.parallel.front().disable_nvls());
    }
    for (uint32_t gpus : CatalogInstanceSizes(*query.catalog, target.id())) {
      if (AsksForOneNodeOf(query.parallel, gpus)) continue;
      node.set_gpus_per_node(gpus);
      configs.push_back(node);
    }
  }
  for (const v1::ParallelConfig& config : configs) {
    *prediction->add_parallel() =
        PredictParallel(iteration, *prediction, target, config, query.catalog, query.price_kind);
  }
}

// A GPU the request named cannot run one of its configurations: the whole
// request is wrong (with every GPU, the others still answer).
absl::Status CheckNamedParallel(const PredictionQuery& query,
                                const std::vector<DevicePrediction>& predictions) {
  if (query.devices.empty()) return absl::OkStatus();
  for (const DevicePrediction& p : predictions) {
    for (size_t i = 0; i < query.parallel.size() && i < static_cast<size_t>(p.parallel_size());
         ++i) {
      const v1::ParallelPrediction& c = p.parallel(static_cast<int>(i));
      if (c.unavailable().empty()) continue;
      return absl::InvalidArgumentError(absl::StrCat("parallel[", i, "] (", c.gpus_per_node(),
                                                     " GPUs per node x ", c.nodes(), " nodes) on ",
                                                     p.device_id(), ": ", c.unavailable()));
    }
  }
  return absl::OkStatus();
}

// Takes predicting `trace` on `gpus` GPUs from `work_left`;
// RESOURCE_EXHAUSTED when that is more than is left of `max_work` (0: no
// limit).
absl::Status TakeWork(const v1::Trace& trace, size_t gpus, int64_t max_work, int64_t* work_left) {
  if (max_work <= 0 || gpus == 0) return absl::OkStatus();
  const int64_t work = PredictionWorkPerDevice(trace) * static_cast<int64_t>(gpus);
  if (work > *work_left) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "predicting this trace on ", gpus, " more GPUs is ", work,
        " units of work (trace entries x GPUs), above what is left of this server's limit of ",
        max_work, " (--max_predict_work): ask for fewer GPUs (devices) or send a smaller trace"));
  }
  *work_left -= work;
  return absl::OkStatus();
}

// Each target's same-chip GPUs (VaryingPredictor::PredictTrace).
std::vector<std::vector<const DeviceSpec*>> Siblings(
    const DeviceDatabase& devices, const std::vector<const DeviceSpec*>& targets) {
  std::vector<std::vector<const DeviceSpec*>> siblings(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    for (const DeviceSpec& spec : devices.devices()) {
      if (spec.id() != targets[i]->id() && !spec.test_only() && SameChip(spec, *targets[i])) {
        siblings[i].push_back(&spec);
      }
    }
  }
  return siblings;
}

void AddUnique(std::string warning, std::vector<std::string>* warnings) {
  if (std::find(warnings->begin(), warnings->end(), warning) == warnings->end()) {
    warnings->push_back(std::move(warning));
  }
}

}  // namespace

absl::StatusOr<PredictionEngine::BatchPredictions> PredictionEngine::PredictAtBatch(
    const v1::Trace& traced, const std::string& trace_id, const DeviceSpec& origin,
    const std::vector<const DeviceSpec*>& targets, uint32_t batch, const PredictionQuery& query,
    HostScaleMemo* host_scale, int64_t* work_left, PredictionStats* stats) const {
  // At another batch, every GPU (the origin's too) is predicted from the
  // trace scaled to it; the host model stays calibrated on the traced one.
  std::optional<BatchScaledTrace> scaled;
  if (batch != traced.batch_size()) {
    HABITAT_ASSIGN_OR_RETURN(scaled, ScaleTraceToBatch(traced, batch));
  }
  const v1::Trace& trace = scaled.has_value() ? scaled->trace : traced;

  // Predictions for another host speed or batch are other predictions.
  std::string cache_key = trace_id;
  if (query.host_speed != 1.0) absl::StrAppend(&cache_key, "|host_speed=", query.host_speed);
  if (scaled.has_value()) absl::StrAppend(&cache_key, "|batch=", trace.batch_size());
  // Data-parallel steps are read from each GPU's per-operation breakdown.
  const bool wants_parallel = !query.parallel.empty() || query.catalog_instances;
  const bool keep_breakdown = query.include_breakdown || wants_parallel;
  std::vector<CachedPrediction> cached(targets.size());
  std::vector<const DeviceSpec*> missed;
  for (size_t t = 0; t < targets.size(); ++t) {
    if (cache_ != nullptr) cached[t] = cache_->Lookup(cache_key, targets[t]->id());
    if (!Answers(cached[t], keep_breakdown)) missed.push_back(targets[t]);
  }
  HABITAT_RETURN_IF_ERROR(TakeWork(trace, missed.size(), query.max_work, work_left));
  // Kernel-varying ops of every missed target in one batched model pass.
  std::vector<VaryingPassTable> varying_tables;
  if (varying_ != nullptr && !missed.empty()) {
    const auto siblings = Siblings(*devices_, missed);
    HABITAT_ASSIGN_OR_RETURN(varying_tables,
                             varying_->PredictTrace(trace, origin, missed, query.stop, &siblings));
  }
  BatchPredictions out;
  out.predictions.reserve(targets.size());
  const TraceFacts facts = missed.empty() ? TraceFacts() : FactsOf(trace);
  size_t miss_index = 0;
  stats->operations_by_device.reserve(stats->operations_by_device.size() + missed.size());
  for (size_t t = 0; t < targets.size(); ++t) {
    const DeviceSpec* target = targets[t];
    CachedPrediction& entry = cached[t];
    if (Answers(entry, keep_breakdown)) {
      ++stats->cache_hits;
    } else {
      ++stats->cache_misses;
      if (!host_scale->has_value()) {
        HABITAT_ASSIGN_OR_RETURN(*host_scale, HostScaleFor(traced, query.stop));
        // A faster host takes proportionally less time for its share.
        if ((*host_scale)->has_value()) ***host_scale /= query.host_speed;
      }
      const VaryingPassTable* table =
          varying_tables.empty() ? nullptr : &varying_tables[miss_index];
      ++miss_index;
      HABITAT_ASSIGN_OR_RETURN(
          DevicePrediction fresh,
          PredictOnDeviceWith(trace, facts, origin, *target, **host_scale, table, query.stop));
      if (scaled.has_value()) MarkBatchScaled(*scaled, &fresh);
      PredictionStats::DeviceOperations& by_device = stats->operations_by_device.emplace_back();
      by_device.device_id = target->id();
      for (const auto& op : fresh.operations()) {
        ++stats->operations_by_method[op.method()];
        ++by_device.by_method[op.method()];
      }
      entry = ForTheCache(std::move(fresh), keep_breakdown);
      if (cache_ != nullptr) cache_->Insert(cache_key, target->id(), entry);
    }
    DevicePrediction& emitted =
        out.predictions.emplace_back(query.include_breakdown ? *entry.full : *entry.summary);
    if (wants_parallel) {
      emitted.set_batch_size(batch);
      AddParallel(IterationFromTrace(trace, *entry.full), *target, query, &emitted);
    }
  }
  if (scaled.has_value()) out.warnings = BatchScalingWarnings(*scaled, traced.batch_size());
  return out;
}

absl::StatusOr<v1::PredictResponse> PredictionEngine::Predict(const v1::Trace& traced,
                                                              std::string trace_id,
                                                              const PredictionQuery& query,
                                                              PredictionStats* stats) const {
  if (!query.trace_already_validated) HABITAT_RETURN_IF_ERROR(ValidateTrace(traced));
  HABITAT_ASSIGN_OR_RETURN(const DeviceSpec* origin, ResolveOrigin(traced));
  if (trace_id.empty()) {
    HABITAT_ASSIGN_OR_RETURN(trace_id, ComputeTraceId(traced));
  }
  HABITAT_ASSIGN_OR_RETURN(const std::vector<const DeviceSpec*> targets,
                           ResolveTargets(query.devices));
  std::string no_memory_reason;
  const std::optional<MemoryModel> memory = MemoryModelFor(traced, &no_memory_reason);
  if (query.fit.has_value() && !memory.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("a fit needs the trace's memory: ", no_memory_reason));
  }

  PredictionStats local_stats;
  if (stats == nullptr) stats = &local_stats;
  int64_t work_left = query.max_work;
  // Per trace, not per device or batch: computed at the first cache miss.
  HostScaleMemo host_scale;
  std::vector<DevicePrediction> predictions(targets.size());
  std::vector<std::string> warnings;
  const std::vector<uint32_t> largest = LargestFittingBatches(memory, query, targets);
  for (const BatchGroup& group : GroupByBatch(traced, query, largest)) {
    std::vector<const DeviceSpec*> group_targets;
    for (size_t t : group.targets) group_targets.push_back(targets[t]);
    HABITAT_ASSIGN_OR_RETURN(BatchPredictions part,
                             PredictAtBatch(traced, trace_id, *origin, group_targets, group.batch,
                                            query, &host_scale, &work_left, stats));
    for (size_t i = 0; i < group.targets.size(); ++i) {
      const size_t t = group.targets[i];
      predictions[t] = std::move(part.predictions[i]);
      AddMemory(memory, group.batch, *targets[t], largest[t], &predictions[t]);
    }
    for (std::string& warning : part.warnings) AddUnique(std::move(warning), &warnings);
  }
  HABITAT_RETURN_IF_ERROR(CheckNamedParallel(query, predictions));
  PriceAndRank(query.catalog, query.price_kind, &predictions);

  v1::PredictResponse response;
  response.set_trace_id(trace_id);
  response.set_origin_device_id(origin->id());
  // With a fit each prediction has its own batch.
  response.set_batch_size(query.fit.has_value()   ? 0
                          : query.batch_size != 0 ? query.batch_size
                                                  : traced.batch_size());
  response.set_traced_batch_size(traced.batch_size());
  for (std::string& warning : warnings) response.add_warnings(std::move(warning));
  if (!memory.has_value()) {
    response.add_warnings(absl::StrCat("no memory prediction: ", no_memory_reason));
  }
  response.set_price_kind(query.price_kind);
  if (query.catalog != nullptr) {
    response.set_catalog(query.catalog->name());
    response.set_currency(query.catalog->currency());
  }
  if (query.catalog != nullptr && query.price_kind == v1::PRICE_KIND_SPOT) {
    auto warning = MissingSpotPricesWarning(*query.catalog, predictions);
    if (warning.has_value()) response.add_warnings(*std::move(warning));
  }
  auto gpu_time_warning = WallTimeFromGpuTimeWarning(traced, predictions);
  if (gpu_time_warning.has_value()) response.add_warnings(*std::move(gpu_time_warning));
  for (auto& p : predictions) *response.add_predictions() = std::move(p);
  auto host_bound_warning = OriginHostBoundWarning(traced);
  if (host_bound_warning.has_value()) response.add_warnings(*std::move(host_bound_warning));
  return response;
}

}  // namespace habitat
