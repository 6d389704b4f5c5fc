#include "core/predict/operation_scaling.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/time_units.h"
#include "core/predict/expected_error.h"
#include "core/predict/op_traffic.h"
#include "core/scaling/wave_scaling.h"
#include "core/trace/op_classification.h"

namespace habitat {
namespace {

using habitat::v1::DeviceSpec;
using habitat::v1::MemoryActivity;
using habitat::v1::Operation;
using habitat::v1::OperationPrediction;
using habitat::v1::Pass;

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
// `auxiliary_only`: predict only the pass's auxiliary kernels
// (IsAuxiliaryKernel), as their share of the pass's time.
ScaledPass ScalePass(const Pass& pass, const DeviceSpec& origin, const DeviceSpec& target,
                     std::optional<uint64_t> estimated_bytes = std::nullopt,
                     const ScalingOptions& options = {}, bool auxiliary_only = false) {
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
    if (auxiliary_only && !IsAuxiliaryKernel(kernel.name())) continue;
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
    if (!auxiliary_only) predicted += ScaleMemory(memory, origin, target);
  }
  if (measured > 0 && pass.time_ns() > 0) {
    result.predicted_ns =
        SaturatingRound(static_cast<double>(pass.time_ns()) * static_cast<double>(predicted) /
                        static_cast<double>(measured));
  } else if (measured > 0 || auxiliary_only) {
    result.predicted_ns = predicted;
  } else {
    result.predicted_ns = pass.time_ns();
  }
  return result;
}

// The auxiliary kernels of a pass (IsAuxiliaryKernel) on `target`, as a
// share of the pass's time, scaled as the kernels of a kernel-alike
// operation are: gamma from the bandwidth they reach, with the pass's
// estimated bytes shared among all its kernels by duration.
Nanoseconds ScaleAuxiliaryKernels(const Pass& pass, const DeviceSpec& origin,
                                  const DeviceSpec& target, std::optional<uint64_t> bytes) {
  return ScalePass(pass, origin, target, bytes, {}, /*auxiliary_only=*/true).predicted_ns;
}

std::string PassName(const Operation& op) {
  if (!op.name().empty()) return op.name();
  return op.backward().recorded_name();
}

// Takes what the device warnings need from a pass the model predicted into
// `notes`; returns whether the pass was raised to the target's floor.
bool NoteModelPass(const VaryingPassPrediction& pass, VaryingNotes* notes) {
  // A split pass takes nothing from the model's trees, on either side.
  if (pass.split_at_roofline) {
    notes->split_at_roofline = true;
  } else if (pass.sibling_id.empty()) {
    notes->target_outside_training |= !pass.target_in_training;
  } else {
    notes->sibling = pass.sibling_id;
  }
  notes->origin_outside_training |= !pass.split_at_roofline && !pass.origin_in_training;
  notes->origin_mode = pass.origin_mode;
  notes->target_mode = pass.target_mode;
  if (pass.large_gemm) {
    notes->large_gemm = true;
    notes->large_gemm_mode = pass.fp32_bound ? MathMode::kFp32 : pass.target_mode;
  }
  notes->capped_at_ceiling |= pass.capped_at_ceiling;
  notes->fp32_bound |= pass.fp32_bound;
  return pass.clamped_to_floor;
}

// A pass of a kernel-varying op the model does not cover, wave-scaled and,
// where the op has a signature, kept at or above the target's floor
// (`*at_limit` set where it was raised to it).
Nanoseconds WaveScaleVaryingPass(const v1::Trace& trace, const Operation& op, bool backward,
                                 const OperationFacts& facts, const DeviceSpec& origin,
                                 const DeviceSpec& target, VaryingNotes* notes, bool* at_limit) {
  // Gamma from the bandwidth the pass achieves, as for kernel-alike
  // ops: without a byte estimate every kernel would count as
  // memory-bound and move by the bandwidth ratio alone.
  Nanoseconds predicted = ScalePass(backward ? op.backward() : op.forward(), origin, target,
                                    facts.dram_bytes[backward ? 1 : 0])
                              .predicted_ns;
  if (auto limit = VaryingPassLimitFor(trace, op, backward, origin, target)) {
    notes->origin_mode = limit->origin_mode;
    notes->target_mode = limit->target_mode;
    // A pass that took no time on the origin (nothing recorded) stays 0.
    if (predicted > 0 && predicted < limit->floor_ns) {
      predicted = limit->floor_ns;
      *at_limit = true;
    }
  }
  return predicted;
}

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
      at_limit = NoteModelPass(pass, notes) || at_limit;
      predicted = pass.predicted_ns;
      if (pass.auxiliary_apart) {
        predicted = SaturatingAdd(
            predicted, ScaleAuxiliaryKernels(backward ? op.backward() : op.forward(), origin,
                                             target, facts.dram_bytes[backward ? 1 : 0]));
        if (predicted < pass.floor_ns) {
          predicted = pass.floor_ns;
          at_limit = true;
        }
      }
      pass_error = pass.expected_error_percent;
    } else {
      predicted =
          WaveScaleVaryingPass(trace, op, backward, facts, origin, target, notes, &at_limit);
      pass_error = kKernelVaryingWaveScaledErrorPercent;
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
    out->set_method(v1::PREDICTION_METHOD_KERNEL_VARYING);
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

// A kernel-alike op, or a kernel-varying one on a GPU with the origin's
// compute units (`same_kernels`), wave-scaled kernel by kernel.
void PredictByWaveScaling(const Operation& op, const OperationFacts& facts,
                          const DeviceSpec& origin, const DeviceSpec& target, bool same_kernels,
                          OperationPrediction* out) {
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
  out->set_predicted_forward_ns(forward.predicted_ns);
  out->set_predicted_backward_ns(backward.predicted_ns);
  const bool has_kernels = op.forward().kernels_size() + op.forward().memory_size() +
                               op.backward().kernels_size() + op.backward().memory_size() >
                           0;
  if (!has_kernels) {
    out->set_method(v1::PREDICTION_METHOD_UNSCALED);
    // Nothing ran on the GPU and nothing is predicted: no error to expect.
    if (out->origin_forward_ns() + out->origin_backward_ns() > 0) {
      out->set_expected_error_percent(kUnscaledErrorPercent);
      out->add_warnings(absl::StrCat(out->name(),
                                     " has a measured time but no recorded kernels; "
                                     "carried over unscaled"));
    }
    return;
  }
  out->set_method(v1::PREDICTION_METHOD_WAVE_SCALING);
  out->set_expected_error_percent(SameComputeUnits(origin, target) ? kSameComputeUnitsErrorPercent
                                                                   : kKernelAlikeErrorPercent);
  const int unscaled = forward.unscaled_kernels + backward.unscaled_kernels;
  if (unscaled > 0) {
    out->add_warnings(
        absl::StrCat(unscaled, " kernel(s) of ", out->name(), " carried over unscaled: ",
                     forward.first_error.empty() ? backward.first_error : forward.first_error));
  }
}

}  // namespace

OperationFacts FactsOf(const Operation& op) {
  OperationFacts facts;
  facts.varying = IsKernelVaryingOperation(op);
  facts.dram_bytes[0] = EstimatePassDramBytes(op, false);
  facts.dram_bytes[1] = EstimatePassDramBytes(op, true);
  return facts;
}

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
  PredictByWaveScaling(op, facts, origin, target, same_kernels, &out);
  return out;
}

}  // namespace habitat
