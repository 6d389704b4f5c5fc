#include "core/predict/varying_predictor.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/stats.h"
#include "common/status_macros.h"
#include "core/devices/device_rates.h"
#include "core/kernel_varying/features.h"
#include "core/kernel_varying/op_signature.h"
#include "core/scaling/wave_scaling.h"
#include "core/trace/math_mode.h"
#include "core/trace/op_classification.h"

namespace habitat {
namespace {

struct PassRef {
  int op_index;
  Nanoseconds time_ns;
  // AuxiliaryKernelShare of the pass.
  double auxiliary_share = 0;
};

// FeatureBatch::row_of of an evaluation without a row.
constexpr size_t kNoRow = ~size_t{0};

// Past this the nanosecond count would overflow (about 285 years).
constexpr double kMaxNs = 9.0e18;

// The origin is measured, and a GPU with the same compute units runs the
// same kernels (the engine wave-scales them): neither needs the model.
bool ModelPredicts(const v1::DeviceSpec& origin, const v1::DeviceSpec& target) {
  return target.id() != origin.id() && !SameComputeUnits(origin, target);
}

// The sibling candidates of target `t`, or null.
const std::vector<const v1::DeviceSpec*>* SiblingsOf(
    const std::vector<std::vector<const v1::DeviceSpec*>>* siblings, size_t t) {
  return siblings == nullptr ? nullptr : &(*siblings)[t];
}

}  // namespace

bool SameChip(const v1::DeviceSpec& a, const v1::DeviceSpec& b) {
  return !a.architecture().empty() && a.architecture() == b.architecture() &&
         a.compute_capability_major() == b.compute_capability_major() &&
         a.compute_capability_minor() == b.compute_capability_minor() && a.sm_count() > 0 &&
         a.sm_count() == b.sm_count() && a.l2_cache_bytes() == b.l2_cache_bytes();
}

namespace {

std::string GroupKey(const kernel_varying::OpSignature& signature, MathMode origin_mode,
                     bool backward) {
  return absl::StrCat(kernel_varying::FamilyName(signature.family), "|",
                      absl::StrJoin(signature.config, ","), "|", MathModeName(origin_mode), "|",
                      backward ? "b" : "f", "|", signature.direction_factor);
}

// What the origin ran: an inferred mode it has no units for (TF32 by
// PyTorch's default on a V100) ran in fp32.
MathMode OriginMathMode(const v1::Trace& trace, const v1::Operation& op,
                        kernel_varying::Family family, const v1::DeviceSpec& origin) {
  return TargetMathMode(InferOpMathMode(trace, op, kernel_varying::IsCudnnFamily(family)).mode,
                        origin);
}

bool IsFullPrecision(MathMode mode) { return mode == MathMode::kFp32 || mode == MathMode::kTf32; }

// The target modes a group is evaluated in: the one it runs in, and for
// TF32 also fp32, the bound of its prediction (VaryingPassPrediction's
// fp32_bound).
constexpr int kPrimary = 0;
constexpr int kFp32Bound = 1;
MathMode EvaluatedMode(MathMode target_mode, int slot) {
  return slot == kFp32Bound ? MathMode::kFp32 : target_mode;
}
int EvaluatedSlots(MathMode target_mode) { return target_mode == MathMode::kTf32 ? 2 : 1; }

// The floor of all directions of the call, as the origin time covers them
// all, in whole nanoseconds.
Nanoseconds CallFloorNs(double floor_ns_per_direction, int direction_factor) {
  return static_cast<Nanoseconds>(
      std::ceil(std::min(floor_ns_per_direction * direction_factor, kMaxNs)));
}

}  // namespace

std::optional<VaryingPassLimit> VaryingPassLimitFor(const v1::Trace& trace, const v1::Operation& op,
                                                    bool backward, const v1::DeviceSpec& origin,
                                                    const v1::DeviceSpec& target) {
  auto signature = kernel_varying::ExtractOpSignature(op);
  if (!signature.ok() || !signature->has_value()) return std::nullopt;
  const kernel_varying::OpSignature& s = **signature;
  VaryingPassLimit limit;
  limit.origin_mode = OriginMathMode(trace, op, s.family, origin);
  // The op's mode comes from its forward kernels first; a backward that ran
  // in the other full-precision mode is bounded in its own.
  const std::optional<MathMode> own = PassKernelMathMode(backward ? op.backward() : op.forward());
  if (own.has_value() && IsFullPrecision(*own) && IsFullPrecision(limit.origin_mode)) {
    limit.origin_mode = TargetMathMode(*own, origin);
  }
  limit.target_mode = TargetMathMode(limit.origin_mode, target);
  auto floor = kernel_varying::FloorNs(s.family, s.config, limit.target_mode, backward, target);
  if (!floor.ok()) return std::nullopt;
  limit.floor_ns = CallFloorNs(*floor, s.direction_factor);
  return limit;
}

absl::StatusOr<std::unique_ptr<VaryingPredictor>> VaryingPredictor::Load(
    const std::string& model_dir, size_t memo_entries) {
  HABITAT_ASSIGN_OR_RETURN(std::unique_ptr<kernel_varying::KernelVaryingModel> model,
                           kernel_varying::KernelVaryingModel::Load(model_dir));
  return std::make_unique<VaryingPredictor>(std::move(model), memo_entries);
}

VaryingPredictor::VaryingPredictor(std::shared_ptr<const kernel_varying::KernelVaryingModel> model,
                                   size_t memo_entries)
    : model_(std::move(model)), memo_entries_(memo_entries) {}

int64_t VaryingPredictor::memo_hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

int64_t VaryingPredictor::memo_misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}

// The model's rows in chunks, `stop` checked between them: one trace can
// hold hundreds of thousands of distinct signatures.
absl::StatusOr<std::vector<double>> VaryingPredictor::EvaluateInChunks(
    const std::vector<float>& batch, size_t rows, const StopCondition& stop) const {
  constexpr size_t kRowsPerChunk = 16 * kOperationsPerStopCheck;
  HABITAT_RETURN_IF_ERROR(stop.Check("evaluating the kernel-varying model"));
  if (rows <= kRowsPerChunk) return model_->PredictLog2Corrections(batch, rows);
  std::vector<double> out;
  out.reserve(rows);
  for (size_t first = 0; first < rows; first += kRowsPerChunk) {
    if (first > 0) HABITAT_RETURN_IF_ERROR(stop.Check("evaluating the kernel-varying model"));
    const size_t count = std::min(kRowsPerChunk, rows - first);
    const std::vector<float> chunk(
        batch.begin() + static_cast<std::ptrdiff_t>(first * kernel_varying::kFeatureCount),
        batch.begin() +
            static_cast<std::ptrdiff_t>((first + count) * kernel_varying::kFeatureCount));
    HABITAT_ASSIGN_OR_RETURN(std::vector<double> part,
                             model_->PredictLog2Corrections(chunk, count));
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

// The group's ratio and correction applied to one pass (after a change of
// math mode, to the pass as it would run on the origin in the target's
// mode): a large GEMM takes no correction (or, after a change of math mode
// or in TF32, is the typical multiple of its roofline) and is never above
// its ceiling (at least the sustained roofline, so above the floor).
absl::StatusOr<double> LargeGemmRooflineOnTarget(const kernel_varying::KernelVaryingModel& model,
                                                 kernel_varying::Family family,
                                                 const kernel_varying::OpConfig& config,
                                                 MathMode origin_mode, MathMode target_mode,
                                                 bool backward, const v1::DeviceSpec& target,
                                                 bool via_sibling) {
  HABITAT_ASSIGN_OR_RETURN(
      const double fp32_tensors,
      kernel_varying::LargeGemmRooflineNs(family, config, target_mode, backward, target));
  if (fp32_tensors > 0 || via_sibling || target_mode != origin_mode ||
      model.TrainedOn(family, target_mode, target.id())) {
    return fp32_tensors;
  }
  // The trees would extrapolate to a GPU they have no tensor-core
  // measurements of; a large GEMM keeps the origin's efficiency.
  return kernel_varying::LargeTensorCoreGemmRooflineNs(family, config, target_mode, backward,
                                                       target);
}

namespace {

// A GEMM or convolution pass in fp16 or bf16, in the origin's mode, on a
// target the model has no measurements of in that mode, where its trees
// would extrapolate from Hopper-only data. Tensor-core convolutions are
// implicit GEMMs on every cuDNN path, so they split as GEMMs do; fp32
// convolutions, whose algorithm (Winograd, FFT) the roofline does not see,
// keep the trees (docs/mixed_precision_accuracy.md, rules 5 and 7).
bool SplitAtRoofline(const kernel_varying::KernelVaryingModel& model, kernel_varying::Family family,
                     MathMode origin_mode, MathMode target_mode, const v1::DeviceSpec& target,
                     bool via_sibling) {
  return !via_sibling && target_mode == origin_mode &&
         (target_mode == MathMode::kFp16 || target_mode == MathMode::kBf16) &&
         !model.TrainedOn(family, target_mode, target.id());
}

// A large GEMM after a change of math mode, or in TF32, is the model's
// typical multiple of its roofline: the origin's distance from its own
// roofline says nothing of the target's.
bool LargeGemmIsTypical(MathMode origin_mode, MathMode target_mode) {
  return target_mode != origin_mode || target_mode == MathMode::kTf32;
}

// What latency-bound work takes on the target over the origin: the ratio of
// SM count times the clock held under load.
double LatencyRatio(const v1::DeviceSpec& origin, const v1::DeviceSpec& target) {
  return static_cast<double>(origin.sm_count()) * SustainedClockMhz(origin) /
         (static_cast<double>(target.sm_count()) * SustainedClockMhz(target));
}

}  // namespace

VaryingPredictor::ModelValue VaryingPredictor::Apply(const Evaluation& e, MathMode origin_mode,
                                                     MathMode target_mode, int direction_factor,
                                                     Nanoseconds origin_ns) const {
  ModelValue out;
  if (e.latency_ratio > 0) {
    // The share of the pass its sustained roofline accounts for moves by
    // the roofline ratio; the rest is latency (too few tiles or blocks to
    // fill the GPU, launch and pipeline fill) and moves as such.
    const double moved_ns = static_cast<double>(origin_ns);
    const double bound_ns = e.origin_roofline_ns * direction_factor;
    const double value =
        std::min(moved_ns, bound_ns) * (e.target_roofline_ns / e.origin_roofline_ns) +
        std::max(moved_ns - bound_ns, 0.0) * e.latency_ratio;
    out.ns = std::min(value, kMaxNs);
    out.split_at_roofline = true;
    return out;
  }
  out.large_gemm = e.large_gemm_ns > 0;
  const double call_roofline_ns = e.large_gemm_ns * direction_factor;
  const bool typical = out.large_gemm && LargeGemmIsTypical(origin_mode, target_mode);
  const double scale =
      out.large_gemm ? e.roofline_ratio : e.roofline_ratio * std::exp2(e.log2_correction);
  const double moved_ns =
      static_cast<double>(origin_ns) + e.mode_change_extra_ns * direction_factor;
  const double value = typical ? call_roofline_ns * model_->large_gemm_typical()
                               : std::min(moved_ns * scale, kMaxNs);
  const double ceiling = out.large_gemm ? call_roofline_ns * model_->large_gemm_ceiling() : kMaxNs;
  out.capped_at_ceiling = value > ceiling;
  out.ns = std::min(value, ceiling);
  return out;
}

const v1::DeviceSpec* VaryingPredictor::TrainedSibling(
    const std::vector<const v1::DeviceSpec*>* candidates, kernel_varying::Family family,
    MathMode mode, const v1::DeviceSpec& target) const {
  if (candidates == nullptr || model_->TrainedOn(family, mode, target.id())) return nullptr;
  for (const v1::DeviceSpec* sibling : *candidates) {
    if (model_->TrainedOn(family, mode, sibling->id())) return sibling;
  }
  return nullptr;
}

// The passes of one signature (family, configuration, directions) in one
// math mode.
struct VaryingPredictor::Group {
  kernel_varying::OpSignature signature;
  MathMode origin_mode = MathMode::kFp32;
  bool backward = false;
  std::vector<PassRef> passes;
  Nanoseconds feature_origin_ns = 0;
  // GroupKey's: the start of the memo keys of the group's evaluations.
  std::string key;
};

// An evaluation the memo did not hold.
struct VaryingPredictor::PendingEvaluation {
  size_t target = 0;
  size_t group = 0;
  int slot = kPrimary;
  const v1::DeviceSpec* sibling = nullptr;  // TrainedSibling's, may be null
  std::string memo_key;
};

// The model's input rows for the pending evaluations that take a
// correction: a large GEMM takes none, so it has no row.
struct VaryingPredictor::FeatureBatch {
  std::vector<float> features;
  // Per pending evaluation: its row, or kNoRow.
  std::vector<size_t> row_of;
  size_t rows = 0;
};

absl::StatusOr<std::vector<VaryingPassTable>> VaryingPredictor::PredictTrace(
    const v1::Trace& trace, const v1::DeviceSpec& origin,
    const std::vector<const v1::DeviceSpec*>& targets, const StopCondition* stop,
    const std::vector<std::vector<const v1::DeviceSpec*>>* siblings) const {
  if (stop == nullptr) stop = &StopCondition::Never();
  HABITAT_ASSIGN_OR_RETURN(std::vector<Group> groups, GroupCoveredPasses(trace, origin, *stop));
  EvaluationGrid evaluations(targets.size(), std::vector<Evaluations>(groups.size()));
  std::vector<PendingEvaluation> pending =
      LookUpMemo(groups, origin, targets, siblings, &evaluations);
  HABITAT_ASSIGN_OR_RETURN(FeatureBatch batch, PrepareEvaluations(groups, origin, targets, pending,
                                                                  *stop, &evaluations));
  HABITAT_RETURN_IF_ERROR(EvaluateAndMemoize(batch, *stop, &pending, &evaluations));
  return ApplyToPasses(groups, evaluations, origin, targets, siblings);
}

absl::StatusOr<std::vector<VaryingPredictor::Group>> VaryingPredictor::GroupCoveredPasses(
    const v1::Trace& trace, const v1::DeviceSpec& origin, const StopCondition& stop) const {
  std::vector<Group> groups;
  absl::flat_hash_map<std::string, size_t> group_index;
  for (int i = 0; i < trace.operations_size(); ++i) {
    if (i % kOperationsPerStopCheck == 0) {
      HABITAT_RETURN_IF_ERROR(stop.Check("grouping kernel-varying operations"));
    }
    const v1::Operation& op = trace.operations(i);
    if (ClassifyOperation(op.name()) != OpKind::kKernelVarying) continue;
    auto signature = kernel_varying::ExtractOpSignature(op);
    // A damaged argument list is not the model's business: the engine
    // wave-scales the op's kernels and says so.
    if (!signature.ok() || !signature->has_value()) continue;
    const MathMode origin_mode = OriginMathMode(trace, op, (*signature)->family, origin);
    for (bool backward : {false, true}) {
      if (backward && !op.has_backward()) continue;
      const Nanoseconds time_ns = backward ? op.backward().time_ns() : op.forward().time_ns();
      if (time_ns / (*signature)->direction_factor < model_->min_origin_ns()) continue;
      std::string key = GroupKey(**signature, origin_mode, backward);
      auto [it, inserted] = group_index.try_emplace(key, groups.size());
      if (inserted)
        groups.push_back(Group{**signature, origin_mode, backward, {}, 0, std::move(key)});
      groups[it->second].passes.push_back(
          PassRef{i, time_ns, AuxiliaryKernelShare(backward ? op.backward() : op.forward())});
    }
  }
  for (auto& group : groups) {
    std::vector<Nanoseconds> times;
    for (const auto& pass : group.passes) times.push_back(pass.time_ns);
    group.feature_origin_ns = UpperMedian(std::move(times)) / group.signature.direction_factor;
  }
  return groups;
}

std::vector<VaryingPredictor::PendingEvaluation> VaryingPredictor::LookUpMemo(
    const std::vector<Group>& groups, const v1::DeviceSpec& origin,
    const std::vector<const v1::DeviceSpec*>& targets, const Siblings* siblings,
    EvaluationGrid* evaluations) const {
  std::vector<PendingEvaluation> pending;
  absl::MutexLock lock(&mu_);
  for (size_t t = 0; t < targets.size(); ++t) {
    if (!ModelPredicts(origin, *targets[t])) continue;
    for (size_t g = 0; g < groups.size(); ++g) {
      const MathMode target_mode = TargetMathMode(groups[g].origin_mode, *targets[t]);
      for (int slot = 0; slot < EvaluatedSlots(target_mode); ++slot) {
        const MathMode evaluated_mode = EvaluatedMode(target_mode, slot);
        // The sibling a pass goes through is part of what it was evaluated on.
        const v1::DeviceSpec* sibling = TrainedSibling(
            SiblingsOf(siblings, t), groups[g].signature.family, evaluated_mode, *targets[t]);
        std::string memo_key =
            absl::StrCat(groups[g].key, "|", groups[g].feature_origin_ns, "|", origin.id(), "|",
                         targets[t]->id(), "|", MathModeName(evaluated_mode), "|",
                         sibling == nullptr ? "" : sibling->id());
        auto it = memo_.find(memo_key);
        if (it != memo_.end()) {
          ++hits_;
          (*evaluations)[t][g][slot] = it->second;
          continue;
        }
        ++misses_;
        pending.push_back({t, g, slot, sibling, std::move(memo_key)});
      }
    }
  }
  return pending;
}

absl::StatusOr<VaryingPredictor::FeatureBatch> VaryingPredictor::PrepareEvaluations(
    const std::vector<Group>& groups, const v1::DeviceSpec& origin,
    const std::vector<const v1::DeviceSpec*>& targets,
    const std::vector<PendingEvaluation>& pending, const StopCondition& stop,
    EvaluationGrid* evaluations) const {
  FeatureBatch batch;
  batch.features.reserve(pending.size() * kernel_varying::kFeatureCount);
  batch.row_of.assign(pending.size(), kNoRow);
  for (size_t p = 0; p < pending.size(); ++p) {
    if (p % kOperationsPerStopCheck == 0) {
      HABITAT_RETURN_IF_ERROR(stop.Check("computing kernel-varying features"));
    }
    const PendingEvaluation& next = pending[p];
    HABITAT_ASSIGN_OR_RETURN(
        const bool has_row,
        PrepareEvaluation(groups[next.group], next, origin, *targets[next.target], &batch.features,
                          &(*evaluations)[next.target][next.group][next.slot]));
    if (has_row) batch.row_of[p] = batch.rows++;
  }
  return batch;
}

absl::StatusOr<bool> VaryingPredictor::PrepareEvaluation(
    const Group& group, const PendingEvaluation& pending, const v1::DeviceSpec& origin,
    const v1::DeviceSpec& target, std::vector<float>* features, Evaluation* evaluation) const {
  const kernel_varying::Family family = group.signature.family;
  const kernel_varying::OpConfig& config = group.signature.config;
  const v1::DeviceSpec* sibling = pending.sibling;
  const MathMode target_mode =
      EvaluatedMode(TargetMathMode(group.origin_mode, target), pending.slot);
  Evaluation& e = *evaluation;
  bool has_row = false;
  // After a change of math mode the pass is moved as one in the target's
  // mode on both GPUs, from what it would take on the origin in that mode.
  if (target_mode != group.origin_mode) {
    HABITAT_ASSIGN_OR_RETURN(
        e.mode_change_extra_ns,
        kernel_varying::ModeChangeExtraNs(family, config, group.origin_mode, target_mode,
                                          group.backward, origin, model_->large_gemm_typical()));
  }
  HABITAT_ASSIGN_OR_RETURN(
      e.large_gemm_ns,
      LargeGemmRooflineOnTarget(*model_, family, config, group.origin_mode, target_mode,
                                group.backward, target, sibling != nullptr));
  if (e.large_gemm_ns == 0 && SplitAtRoofline(*model_, family, group.origin_mode, target_mode,
                                              target, sibling != nullptr)) {
    HABITAT_ASSIGN_OR_RETURN(
        e.origin_roofline_ns,
        kernel_varying::SustainedRooflineNs(family, config, target_mode, group.backward, origin));
    HABITAT_ASSIGN_OR_RETURN(
        e.target_roofline_ns,
        kernel_varying::SustainedRooflineNs(family, config, target_mode, group.backward, target));
    e.latency_ratio = LatencyRatio(origin, target);
  } else if (e.large_gemm_ns > 0 || (sibling != nullptr && sibling->id() == origin.id())) {
    // No correction: a large GEMM (features.h), or a target whose trained
    // sibling is the origin itself.
    HABITAT_ASSIGN_OR_RETURN(e.roofline_ratio,
                             kernel_varying::RooflineRatio(family, config, target_mode, target_mode,
                                                           group.backward, origin, target));
  } else {
    has_row = true;
    const v1::DeviceSpec& evaluated = sibling != nullptr ? *sibling : target;
    HABITAT_RETURN_IF_ERROR(kernel_varying::AppendFeatures(
        family, config, target_mode, target_mode, group.backward, origin, evaluated,
        static_cast<double>(group.feature_origin_ns) + e.mode_change_extra_ns, features,
        &e.roofline_ratio));
    if (sibling != nullptr) {
      HABITAT_ASSIGN_OR_RETURN(
          const double step, kernel_varying::RooflineRatio(family, config, target_mode, target_mode,
                                                           group.backward, *sibling, target));
      e.roofline_ratio *= step;
    }
  }
  HABITAT_ASSIGN_OR_RETURN(
      e.floor_ns, kernel_varying::FloorNs(family, config, target_mode, group.backward, target));
  return has_row;
}

absl::Status VaryingPredictor::EvaluateAndMemoize(const FeatureBatch& batch,
                                                  const StopCondition& stop,
                                                  std::vector<PendingEvaluation>* pending,
                                                  EvaluationGrid* evaluations) const {
  if (pending->empty()) return absl::OkStatus();
  std::vector<double> out;
  if (batch.rows > 0) {
    HABITAT_ASSIGN_OR_RETURN(out, EvaluateInChunks(batch.features, batch.rows, stop));
  }
  absl::MutexLock lock(&mu_);
  // Bounded by dropping everything: signatures recur across requests in
  // bursts (the same model re-uploaded), so recency tracking buys little.
  if (memo_.size() + pending->size() > memo_entries_) memo_.clear();
  for (size_t p = 0; p < pending->size(); ++p) {
    PendingEvaluation& done = (*pending)[p];
    Evaluation& e = (*evaluations)[done.target][done.group][done.slot];
    e.log2_correction = batch.row_of[p] == kNoRow ? 0 : out[batch.row_of[p]];
    if (memo_entries_ > 0) memo_.insert_or_assign(std::move(done.memo_key), e);
  }
  return absl::OkStatus();
}

std::vector<VaryingPassTable> VaryingPredictor::ApplyToPasses(
    const std::vector<Group>& groups, const EvaluationGrid& evaluations,
    const v1::DeviceSpec& origin, const std::vector<const v1::DeviceSpec*>& targets,
    const Siblings* siblings) const {
  std::vector<VaryingPassTable> tables(targets.size());
  for (size_t t = 0; t < targets.size(); ++t) {
    const v1::DeviceSpec& target = *targets[t];
    if (!ModelPredicts(origin, target)) continue;
    for (size_t g = 0; g < groups.size(); ++g) {
      const Group& group = groups[g];
      const Evaluations& e = evaluations[t][g];
      const VaryingPassPrediction shared =
          GroupPrediction(group, e[kPrimary], origin, target, SiblingsOf(siblings, t));
      for (const auto& pass : group.passes) {
        tables[t][VaryingPassKey(pass.op_index, group.backward)] = PassPrediction(
            shared, e, group.signature.direction_factor, pass.time_ns, pass.auxiliary_share);
      }
    }
  }
  return tables;
}

VaryingPassPrediction VaryingPredictor::GroupPrediction(
    const Group& group, const Evaluation& primary, const v1::DeviceSpec& origin,
    const v1::DeviceSpec& target, const std::vector<const v1::DeviceSpec*>* siblings) const {
  const kernel_varying::Family family = group.signature.family;
  VaryingPassPrediction prediction;
  prediction.origin_mode = group.origin_mode;
  prediction.target_mode = TargetMathMode(group.origin_mode, target);
  prediction.target_in_training = model_->TrainedOn(family, prediction.target_mode, target.id());
  prediction.origin_in_training = model_->TrainedOn(family, group.origin_mode, origin.id());
  prediction.trained_on_target = prediction.target_in_training && prediction.origin_in_training;
  prediction.expected_error_percent = model_->ExpectedErrorPercent(family, target.id());
  if (const v1::DeviceSpec* sibling =
          TrainedSibling(siblings, family, prediction.target_mode, target)) {
    prediction.sibling_id = sibling->id();
    prediction.expected_error_percent =
        std::hypot(model_->ExpectedErrorPercent(family, sibling->id()), kSiblingStepErrorPercent);
  }
  // Moving to another math mode is a second, independent step.
  if (prediction.target_mode != group.origin_mode) {
    prediction.expected_error_percent =
        std::hypot(prediction.expected_error_percent,
                   model_->ModeChangeErrorPercent(family, group.origin_mode));
  }
  prediction.floor_ns = CallFloorNs(primary.floor_ns, group.signature.direction_factor);
  return prediction;
}

bool VaryingPredictor::MovesByRoofline(const Evaluation& e, MathMode origin_mode,
                                       MathMode target_mode) {
  if (e.latency_ratio > 0) return true;
  return e.large_gemm_ns > 0 && !LargeGemmIsTypical(origin_mode, target_mode);
}

VaryingPassPrediction VaryingPredictor::PassPrediction(const VaryingPassPrediction& shared,
                                                       const Evaluations& e, int direction_factor,
                                                       Nanoseconds origin_ns,
                                                       double auxiliary_share) const {
  // A pass moved by a roofline ratio moves only its GEMM or convolution
  // kernels so: its layout and elementwise kernels stream memory on every
  // GPU, and the engine wave-scales them (auxiliary_apart).
  const bool apart =
      auxiliary_share > 0 && MovesByRoofline(e[kPrimary], shared.origin_mode, shared.target_mode);
  if (apart) {
    origin_ns = static_cast<Nanoseconds>(
        std::llround(static_cast<double>(origin_ns) * (1.0 - auxiliary_share)));
  }
  ModelValue value =
      Apply(e[kPrimary], shared.origin_mode, shared.target_mode, direction_factor, origin_ns);
  bool fp32_bound = false;
  if (EvaluatedSlots(shared.target_mode) > kFp32Bound) {
    const ModelValue fp32 =
        Apply(e[kFp32Bound], shared.origin_mode, MathMode::kFp32, direction_factor, origin_ns);
    fp32_bound = fp32.ns < value.ns;
    if (fp32_bound) value = fp32;
  }
  const Nanoseconds raw = static_cast<Nanoseconds>(std::llround(value.ns));
  VaryingPassPrediction out = shared;
  out.large_gemm = value.large_gemm;
  out.split_at_roofline = value.split_at_roofline;
  out.capped_at_ceiling = value.capped_at_ceiling;
  out.fp32_bound = fp32_bound;
  out.auxiliary_apart = apart;
  // Apart, the floor bounds the whole pass: the engine applies it after
  // adding the auxiliary kernels.
  out.clamped_to_floor = !apart && raw < shared.floor_ns;
  out.predicted_ns = apart ? raw : std::max(raw, shared.floor_ns);
  return out;
}

}  // namespace habitat
