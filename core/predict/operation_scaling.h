// Predicting one operation of a trace on one target GPU: kernel-alike
// operations wave-scaled kernel by kernel, kernel-varying ones from the
// trained predictor's table (or wave-scaled, or carried over unscaled where
// there is none). Internal to the prediction core (device_prediction.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/predict/varying_predictor.h"
#include "core/trace/math_mode.h"
#include "habitat/v1/device.pb.h"
#include "habitat/v1/prediction_service.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// What PredictOperation reads from an operation whatever the target GPU:
// worked out once per trace, not once per GPU (docs/benchmarks.md, cold
// predictions).
struct OperationFacts {
  bool varying = false;
  // EstimatePassDramBytes of the forward [0] and backward [1] pass.
  std::optional<uint64_t> dram_bytes[2];
};

OperationFacts FactsOf(const habitat::v1::Operation& op);

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
  // A pass was a GEMM split at its roofline (VaryingPassPrediction).
  bool split_at_roofline = false;
};

// Predicts operation `index` of `trace` (`op`, with `facts` = FactsOf(op))
// on `target`. `trace`: the trace `op` belongs to (kernel-varying ops read
// its math settings). `is_origin`: the target is the origin GPU (the
// measured times). `varying_table`: the kernel-varying predictions for this
// target, null to carry those ops over unscaled. `notes` receives what the
// device warnings need about kernel-varying ops.
habitat::v1::OperationPrediction PredictOperation(
    const habitat::v1::Trace& trace, const habitat::v1::Operation& op, uint32_t index,
    const OperationFacts& facts, const habitat::v1::DeviceSpec& origin,
    const habitat::v1::DeviceSpec& target, bool is_origin, const VaryingPassTable* varying_table,
    VaryingNotes* notes);

}  // namespace habitat
