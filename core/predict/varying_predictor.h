// Predicts the passes of kernel-varying operations (convolutions, matrix
// multiplies, LSTMs, attention) with the trained model of core/kernel_varying, for all
// target GPUs of a request in one batched model call:
//   predicted = max(floor, origin time * roofline ratio * 2 ** correction)
// with the roofline ratio and the floor from core/kernel_varying/features.h, each in
// the math mode the pass runs in on that GPU. A pass that runs in another
// mode on the target than on the origin (no tensor cores of the origin's
// mode there) is moved as a pass in the target's mode on both GPUs, from its
// origin time plus the extra arithmetic that mode costs on the origin
// (kernel_varying::ModeChangeExtraNs): the origin's distance from its roofline in its
// own mode says little of CUDA cores. A large fp32 GEMM on the
// target takes no correction and is capped (features.h says why), or, when
// the origin ran it in another mode or it runs in TF32, is the typical
// multiple of its sustained roofline. A pass in TF32 on the target is never
// predicted slower than the same pass in fp32 there.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/time_units.h"
#include "core/kernel_varying/kernel_varying_model.h"
#include "core/predict/stop_condition.h"
#include "core/trace/math_mode.h"
#include "habitat/v1/device.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

struct VaryingPassPrediction {
  Nanoseconds predicted_ns = 0;
  // The mode the pass ran in on the origin (InferOpMathMode, fp32 where the
  // origin has no units of the inferred mode) and the one it runs in on the
  // target (TargetMathMode).
  MathMode origin_mode = MathMode::kFp32;
  MathMode target_mode = MathMode::kFp32;
  // The target's hard limit for the pass (FloorNs, rounded up to whole
  // nanoseconds); predicted_ns is never below it.
  Nanoseconds floor_ns = 0;
  // The model's value was below floor_ns, so the prediction is the floor.
  bool clamped_to_floor = false;
  // The pass is a large GEMM on fp32 tensors on the target
  // (kernel_varying::LargeGemmRooflineNs). In fp32 on both GPUs it moves by the
  // sustained roofline ratio without the model's correction. If it ran in
  // another math mode on the origin (TF32 or bf16 on a GPU with those
  // units, fp32 here), the origin's distance from its roofline in that mode
  // says nothing of this one; in TF32 on the target, the model has no TF32
  // GEMM of any GPU and the origin's distance is its own architecture's
  // (an H100 runs GPT-2's output layer, 50257 columns, at 2.9x its TF32
  // roofline and at 1.0x its fp32 one). Both are predicted at the model's
  // large_gemm_typical times the target's sustained roofline. Also set for
  // a large fp16 or bf16 GEMM or convolution (an implicit GEMM;
  // kernel_varying::LargeTensorCoreGemmRooflineNs) in the
  // origin's mode on a target the model has no measurements of in that
  // mode: it moves by the sustained roofline ratio alone, under the same
  // ceiling.
  bool large_gemm = false;
  // Of a large GEMM: the origin time so moved was above the model's
  // large_gemm_ceiling times the target's sustained roofline, so the
  // prediction is that ceiling.
  bool capped_at_ceiling = false;
  // A GEMM pass below the large-GEMM test, in fp16 or bf16 on a target the
  // model has no measurements of in that mode: no tree correction, its
  // roofline share moved by the roofline ratio and the rest by SM count x
  // sustained clock (VaryingPredictor::Apply).
  bool split_at_roofline = false;
  // The pass moved by a roofline ratio (split_at_roofline, or large_gemm
  // keeping the origin's efficiency) and has auxiliary kernels
  // (IsAuxiliaryKernel): predicted_ns covers the rest of the pass, not
  // raised to floor_ns; the engine adds those kernels, wave-scaled as
  // kernel-alike ones, and keeps the sum at or above floor_ns.
  bool auxiliary_apart = false;
  // The pass runs in TF32 on the target, and the same pass in fp32 there
  // was predicted faster: the prediction is that one (a GPU's TF32
  // throughput is at least its fp32 one, so allowing TF32 does not slow a
  // pass down; the model, which has no TF32 measurements off Hopper, can
  // say otherwise). large_gemm and capped_at_ceiling then describe the fp32
  // prediction.
  bool fp32_bound = false;
  // The training data had measurements of this family on the target GPU in
  // the target mode and on the origin GPU in the origin mode; false means
  // the model extrapolated from the GPUs' specs.
  bool trained_on_target = false;
  // Each half of trained_on_target: the target GPU in the target mode, the
  // origin GPU in the origin mode.
  bool target_in_training = false;
  // Set when the target is not in the training data for the pass but a GPU
  // with the same chip is (SameChip): the model predicted the pass on that
  // GPU, and the ratio of the two GPUs' sustained rooflines moved it to the
  // target (their clocks, power limits and memory differ; how close that
  // ratio alone comes on the one pair measured, H100 SXM and H200:
  // docs/kernel_varying_accuracy.md, "A GPU outside the training data with a
  // sibling in it"). target_in_training stays false.
  std::string sibling_id;
  bool origin_in_training = false;
  // The error the held-out evaluation measured for the family on this
  // target (the manifest's expected_error); after a change of math mode,
  // combined in quadrature with the mode-change error
  // (KernelVaryingModel::ModeChangeErrorPercent).
  double expected_error_percent = 0;
};

// The error (MAPE, %) the step from a trained sibling to the target adds:
// the sustained-roofline ratio between the H100 SXM and the H200 (the one
// same-chip pair with measurements on both) on held-out configurations,
// fp32, worst family (docs/kernel_varying_accuracy.md, table "H100 <->
// H200", sustained roofline column).
inline constexpr double kSiblingStepErrorPercent = 10.1;

// Whether two GPUs carry the same chip: architecture, compute capability,
// SM count and L2 size (clocks, power limit and memory may differ), e.g. a
// V100 PCIe and a V100 SXM2, or the A100 PCIe and SXM boards.
bool SameChip(const v1::DeviceSpec& a, const v1::DeviceSpec& b);

// The sustained roofline (ns, one direction) under which a pass counts as a
// large GEMM on `target` in `target_mode`, else 0: a large GEMM on fp32
// tensors (kernel_varying::LargeGemmRooflineNs), or one in fp16/bf16 (a convolution
// too) run in the
// origin's mode on a target `model` has no measurements of for the family
// in that mode, and not predicted through a trained sibling
// (kernel_varying::LargeTensorCoreGemmRooflineNs). Errors as those.
absl::StatusOr<double> LargeGemmRooflineOnTarget(const kernel_varying::KernelVaryingModel& model,
                                                 kernel_varying::Family family,
                                                 const kernel_varying::OpConfig& config,
                                                 MathMode origin_mode, MathMode target_mode,
                                                 bool backward, const v1::DeviceSpec& target,
                                                 bool via_sibling);

// Key: 2 * operation index + (1 for the backward pass). Passes without an
// entry are not covered by the model (no signature, or shorter than the
// model's min_origin_ns); the engine wave-scales their kernels.
using VaryingPassTable = absl::flat_hash_map<int, VaryingPassPrediction>;

inline int VaryingPassKey(int op_index, bool backward) { return 2 * op_index + (backward ? 1 : 0); }

// The math modes and hard limit of one pass of a kernel-varying operation,
// for passes the model does not cover (shorter than its min_origin_ns): the
// engine wave-scales those and keeps them at or above the floor.
struct VaryingPassLimit {
  MathMode origin_mode = MathMode::kFp32;
  MathMode target_mode = MathMode::kFp32;
  // As VaryingPassPrediction::floor_ns.
  Nanoseconds floor_ns = 0;
};

// The limit of `op`'s forward or backward pass moved from `origin` to
// `target`, by the same rules as PredictTrace (modes from InferOpMathMode and
// TargetMathMode, floor from FloorNs over all directions of the call).
// nullopt when the op is not kernel-varying, has no signature the features
// understand, or a GPU lacks a spec the floor needs.
std::optional<VaryingPassLimit> VaryingPassLimitFor(const v1::Trace& trace, const v1::Operation& op,
                                                    bool backward, const v1::DeviceSpec& origin,
                                                    const v1::DeviceSpec& target);

class VaryingPredictor {
 public:
  // Loads `model_dir` (models/kernel_varying: manifest.json and the model
  // file it names); errors name the file. `memo_entries` bounds the memo of
  // model outputs per (op signature, math modes, pass, origin time, origin
  // GPU, target).
  static absl::StatusOr<std::unique_ptr<VaryingPredictor>> Load(const std::string& model_dir,
                                                                size_t memo_entries);
  VaryingPredictor(std::shared_ptr<const kernel_varying::KernelVaryingModel> model,
                   size_t memo_entries);

  // One table per target, in order. Identical signatures in the same math
  // mode within the trace (e.g. the same layer repeated) are evaluated once,
  // at the median of their origin times, and the ratio applied to each.
  // `siblings` (may be null; else one list per target): GPUs with the
  // target's chip (SameChip), in preference order; a pass whose family and
  // mode the training data lacks on the target is predicted on the first of
  // them it has (VaryingPassPrediction::sibling_id). INVALID_ARGUMENT when a
  // GPU lacks a spec the features need; the status of `stop` (may be null)
  // when it says to give up.
  absl::StatusOr<std::vector<VaryingPassTable>> PredictTrace(
      const v1::Trace& trace, const v1::DeviceSpec& origin,
      const std::vector<const v1::DeviceSpec*>& targets, const StopCondition* stop = nullptr,
      const std::vector<std::vector<const v1::DeviceSpec*>>* siblings = nullptr) const;

  const kernel_varying::KernelVaryingModel& model() const { return *model_; }
  // Model evaluations answered from the memo / computed, since start.
  int64_t memo_hits() const;
  int64_t memo_misses() const;

 private:
  absl::StatusOr<std::vector<double>> EvaluateInChunks(const std::vector<float>& batch, size_t rows,
                                                       const StopCondition& stop) const;

  // What one model evaluation gives a group of passes on one target in one
  // target math mode.
  struct Evaluation {
    double log2_correction = 0;
    double roofline_ratio = 1;
    double floor_ns = 0;  // per direction, unrounded
    // Per direction, unrounded; 0 where the pass is not a large GEMM on
    // fp32 tensors (kernel_varying::LargeGemmRooflineNs), or in fp16/bf16 on a target
    // outside the model's data in that mode
    // (kernel_varying::LargeTensorCoreGemmRooflineNs): its sustained roofline there.
    double large_gemm_ns = 0;
    // Per direction, unrounded: after a change of math mode, what the
    // origin would take longer in the target's mode (kernel_varying::ModeChangeExtraNs).
    double mode_change_extra_ns = 0;
    // Per direction, unrounded; 0 unless the pass is a GEMM below the
    // large-GEMM test, in fp16 or bf16, on a target the model has no
    // measurements of in that mode (see Apply): its sustained roofline on
    // the origin and on the target, and the ratio latency-bound work moves
    // by (SM count times the clock held under load).
    double origin_roofline_ns = 0;
    double target_roofline_ns = 0;
    double latency_ratio = 0;
  };

  // A pass's prediction from an evaluation, before the floor.
  struct ModelValue {
    double ns = 0;
    bool large_gemm = false;
    bool capped_at_ceiling = false;
    bool split_at_roofline = false;
  };
  ModelValue Apply(const Evaluation& e, MathMode origin_mode, MathMode target_mode,
                   int direction_factor, Nanoseconds origin_ns) const;

  // The sibling of `target` (one of `candidates`) a pass of `family` in
  // `mode` is predicted on, or null: the target is not in the training data
  // for them and the sibling is.
  const v1::DeviceSpec* TrainedSibling(const std::vector<const v1::DeviceSpec*>* candidates,
                                       kernel_varying::Family family, MathMode mode,
                                       const v1::DeviceSpec& target) const;

  // PredictTrace's stages, in order (varying_predictor.cc): group the
  // covered passes by signature, look their evaluations up in the memo,
  // prepare the rest (the model's rows for those it corrects), evaluate and
  // memoize them, and apply each group's evaluations to its passes.
  struct Group;
  struct PendingEvaluation;
  struct FeatureBatch;
  using Evaluations = std::array<Evaluation, 2>;                 // by slot: primary, fp32 bound
  using EvaluationGrid = std::vector<std::vector<Evaluations>>;  // [target][group]
  using Siblings = std::vector<std::vector<const v1::DeviceSpec*>>;
  absl::StatusOr<std::vector<Group>> GroupCoveredPasses(const v1::Trace& trace,
                                                        const v1::DeviceSpec& origin,
                                                        const StopCondition& stop) const;
  std::vector<PendingEvaluation> LookUpMemo(const std::vector<Group>& groups,
                                            const v1::DeviceSpec& origin,
                                            const std::vector<const v1::DeviceSpec*>& targets,
                                            const Siblings* siblings,
                                            EvaluationGrid* evaluations) const;
  absl::StatusOr<FeatureBatch> PrepareEvaluations(const std::vector<Group>& groups,
                                                  const v1::DeviceSpec& origin,
                                                  const std::vector<const v1::DeviceSpec*>& targets,
                                                  const std::vector<PendingEvaluation>& pending,
                                                  const StopCondition& stop,
                                                  EvaluationGrid* evaluations) const;
  // Fills `evaluation` but its correction; true when it appended the row
  // the model corrects it by to `features`.
  absl::StatusOr<bool> PrepareEvaluation(const Group& group, const PendingEvaluation& pending,
                                         const v1::DeviceSpec& origin, const v1::DeviceSpec& target,
                                         std::vector<float>* features,
                                         Evaluation* evaluation) const;
  absl::Status EvaluateAndMemoize(const FeatureBatch& batch, const StopCondition& stop,
                                  std::vector<PendingEvaluation>* pending,
                                  EvaluationGrid* evaluations) const;
  // The fp32 evaluation bounds a TF32 pass; no pass is below the target's
  // floor.
  std::vector<VaryingPassTable> ApplyToPasses(const std::vector<Group>& groups,
                                              const EvaluationGrid& evaluations,
                                              const v1::DeviceSpec& origin,
                                              const std::vector<const v1::DeviceSpec*>& targets,
                                              const Siblings* siblings) const;
  // What every pass of `group` shares on `target`: modes, training
  // coverage, expected error, floor.
  VaryingPassPrediction GroupPrediction(const Group& group, const Evaluation& primary,
                                        const v1::DeviceSpec& origin, const v1::DeviceSpec& target,
                                        const std::vector<const v1::DeviceSpec*>* siblings) const;
  // `auxiliary_share`: AuxiliaryKernelShare of the pass.
  VaryingPassPrediction PassPrediction(const VaryingPassPrediction& shared, const Evaluations& e,
                                       int direction_factor, Nanoseconds origin_ns,
                                       double auxiliary_share) const;
  // Whether `e` moves a pass by a roofline ratio (split at its roofline, or
  // a large GEMM keeping the origin's efficiency) rather than by the trees
  // or a typical multiple.
  static bool MovesByRoofline(const Evaluation& e, MathMode origin_mode, MathMode target_mode);

  std::shared_ptr<const kernel_varying::KernelVaryingModel> model_;
  const size_t memo_entries_;
  mutable absl::Mutex mu_;
  mutable absl::flat_hash_map<std::string, Evaluation> memo_ ABSL_GUARDED_BY(mu_);
  mutable int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace habitat
