#include "core/predict/warning_tally.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/predict/host_replay.h"

namespace habitat {
namespace {

using habitat::v1::DevicePrediction;
using habitat::v1::DeviceSpec;
using habitat::v1::OperationPrediction;

// Index into per-mode tables (features.h asserts kAllMathModes' order).
size_t ModeIndex(MathMode mode) { return static_cast<size_t>(mode); }

// Mode names for people: "TF32" as NVIDIA writes it, the others as
// MathModeName.
std::string DisplayModeName(MathMode mode) {
  return mode == MathMode::kTf32 ? "TF32" : std::string(MathModeName(mode));
}

double Percent(Nanoseconds ns, Nanoseconds origin_total) {
  return 100.0 * static_cast<double>(ns) / static_cast<double>(origin_total);
}

}  // namespace

void WarningTally::Add(const OperationPrediction& op, const VaryingNotes& notes) {
  const Nanoseconds origin_ns = op.origin_forward_ns() + op.origin_backward_ns();
  if (op.method() == v1::PREDICTION_METHOD_UNSCALED && origin_ns > 0) {
    ++unscaled_ops_;
    unscaled_origin_ += origin_ns;
  }
  if (notes.origin_mode.has_value() && *notes.origin_mode != *notes.target_mode) {
    fallback_[ModeIndex(*notes.origin_mode)].Add(origin_ns);
  }
  if (op.method() == v1::PREDICTION_METHOD_MLP && notes.origin_outside_training) {
    origin_untrained_[ModeIndex(*notes.origin_mode)].Add(origin_ns);
  }
  if (op.method() == v1::PREDICTION_METHOD_MLP && notes.target_outside_training) {
    target_untrained_[ModeIndex(*notes.target_mode)].Add(origin_ns);
  }
  if (op.method() == v1::PREDICTION_METHOD_MLP && notes.split_at_roofline) {
    split_[ModeIndex(*notes.target_mode)].Add(origin_ns);
  }
  if (op.at_hardware_limit()) at_limit_.Add(origin_ns);
  if (notes.large_gemm) large_gemms_[ModeIndex(notes.large_gemm_mode)].Add(origin_ns);
  if (notes.fp32_bound) fp32_bound_.Add(origin_ns);
  if (op.method() == v1::PREDICTION_METHOD_MLP && !notes.sibling.empty()) {
    via_sibling_.Add(origin_ns);
    sibling_ = notes.sibling;
  }
  if (notes.capped_at_ceiling) capped_.Add(origin_ns);
}

void WarningTally::Write(const DeviceSpec& origin, const DeviceSpec& target,
                         Nanoseconds origin_total, DevicePrediction* prediction) const {
  if (unscaled_ops_ > 0 && origin_total > 0) {
    prediction->add_warnings(absl::StrFormat(
        "%d operation(s), %.1f%% of the origin GPU time, were carried over unscaled "
        "(see the per-operation warnings with --breakdown)",
        unscaled_ops_, 100.0 * static_cast<double>(unscaled_origin_) / origin_total));
  }
  if (origin_total > 0) {
    WriteMathModeWarnings(origin, origin_total, prediction);
    WriteTrainingWarnings(origin, origin_total, prediction);
    WriteLimitWarnings(target, origin_total, prediction);
  }
  if (target.test_only()) {
    prediction->add_warnings(
        absl::StrCat(target.id(), " is a test-only device entry, not a product"));
  }
}

void WarningTally::WriteMathModeWarnings(const DeviceSpec& origin, Nanoseconds origin_total,
                                         DevicePrediction* prediction) const {
  for (MathMode mode : mlp::kAllMathModes) {
    const OpShare& share = fallback_[ModeIndex(mode)];
    if (share.operations == 0) continue;
    // TargetMathMode's rule: a GPU without units of the mode runs fp32.
    // The text does not name the target (the prediction is the target's),
    // so clients can print one line for every GPU it applies to.
    prediction->add_warnings(absl::StrFormat(
        "%d operation(s), %.1f%% of the origin GPU time, ran in %s on %s and run in fp32 on "
        "the target GPU, which has no %s tensor cores",
        share.operations, Percent(share.origin_ns, origin_total), DisplayModeName(mode),
        origin.id(), DisplayModeName(mode)));
  }
}

void WarningTally::WriteTrainingWarnings(const DeviceSpec& origin, Nanoseconds origin_total,
                                         DevicePrediction* prediction) const {
  // One line per side the training data lacks, with the modes it lacks.
  struct Untrained {
    const OpShare* by_mode;
    const char* side;
    std::string gpu;
    const char* runs;
  };
  for (const Untrained& u : {Untrained{target_untrained_, "target", "it", "run in there"},
                             Untrained{origin_untrained_, "origin", origin.id(), "ran in"}}) {
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
    prediction->add_warnings(absl::StrFormat(
        "%d operation(s), %.1f%% of the origin GPU time, were predicted by the kernel-varying "
        "model with the %s GPU outside its training data (their operator types were not "
        "measured on %s in the math mode they %s: %s); it extrapolated from the GPUs' specs, "
        "expect larger errors there",
        all.operations, Percent(all.origin_ns, origin_total), u.side, u.gpu, u.runs,
        absl::StrJoin(modes, ", ")));
  }
  for (MathMode mode : mlp::kAllMathModes) {
    const OpShare& share = split_[ModeIndex(mode)];
    if (share.operations == 0) continue;
    prediction->add_warnings(absl::StrFormat(
        "%d operation(s), %.1f%% of the origin GPU time, are %s GEMMs the kernel-varying model "
        "has no measurements of on this GPU: the share their sustained roofline accounts for "
        "was moved by the roofline ratio, the rest by SM count x clock as latency (less "
        "certain than measured operator types)",
        share.operations, Percent(share.origin_ns, origin_total), DisplayModeName(mode)));
  }
  if (via_sibling_.operations > 0) {
    prediction->add_warnings(absl::StrFormat(
        "%d operation(s), %.1f%% of the origin GPU time, were predicted by the kernel-varying "
        "model on %s, which has this GPU's chip and is in its training data, and moved here "
        "by the ratio of the two GPUs' sustained rooflines (their clocks, power limits or "
        "memory differ)",
        via_sibling_.operations, Percent(via_sibling_.origin_ns, origin_total), sibling_));
  }
}

void WarningTally::WriteLimitWarnings(const DeviceSpec& target, Nanoseconds origin_total,
                                      DevicePrediction* prediction) const {
  if (at_limit_.operations > 0) {
    prediction->add_warnings(absl::StrFormat(
        "%d operation(s), %.1f%% of the origin GPU time, were predicted faster than the "
        "target GPU's datasheet peak FLOPS (in their math mode) or memory bandwidth allow, "
        "and were raised to that limit (at_hardware_limit)",
        at_limit_.operations, Percent(at_limit_.origin_ns, origin_total)));
  }
  for (MathMode mode : mlp::kAllMathModes) {
    const OpShare& share = large_gemms_[ModeIndex(mode)];
    if (share.operations == 0 || mlp::MeasuredGemmTflops(target, mode) > 0) continue;
    prediction->add_warnings(absl::StrFormat(
        "%d operation(s), %.1f%% of the origin GPU time, are large %s GEMMs on the target "
        "GPU, moved by its sustained %s GEMM throughput, which no measurement gives for "
        "it: %.2f of its datasheet peak is assumed",
        share.operations, Percent(share.origin_ns, origin_total), DisplayModeName(mode),
        DisplayModeName(mode), mlp::kDefaultSustainedFraction));
  }
  if (capped_.operations > 0) {
    prediction->add_warnings(absl::StrFormat(
        "%d operation(s), %.1f%% of the origin GPU time, are large GEMMs on the target "
        "GPU whose origin time, moved by the two GPUs' sustained GEMM throughputs, came out "
        "slower than the GPUs measured run such GEMMs (the kernel-varying model's large-GEMM "
        "ceiling times the target's sustained GEMM time in their mode); they were lowered to "
        "that ceiling",
        capped_.operations, Percent(capped_.origin_ns, origin_total)));
  }
  if (fp32_bound_.operations > 0) {
    prediction->add_warnings(absl::StrFormat(
        "%d operation(s), %.1f%% of the origin GPU time, run in TF32 on the target GPU and "
        "were predicted slower there than in fp32; they take the fp32 prediction (the GPU's "
        "TF32 throughput is at least its fp32 one; the kernel-varying model has no TF32 "
        "measurements of any GPU but Hopper)",
        fp32_bound_.operations, Percent(fp32_bound_.origin_ns, origin_total)));
  }
}

std::optional<std::string> ProfiledHostTimelineWarning(const v1::Trace& trace) {
  const auto& meta = trace.metadata();
  auto timeline = meta.find("kineto.host_timeline");
  if (timeline == meta.end() || timeline->second != "profiled" || !HasHostTimeline(trace)) {
    return std::nullopt;
  }
  auto why = meta.find("kineto.host_timeline_why");
  return absl::StrFormat(
      "profiled: this wall time is the profiled step's (%.3f ms), the profiler's own host cost "
      "included, which could not be estimated: %s. Every GPU's wall time, throughput, cost and "
      "rank carry that cost; pass the step's wall time measured without the profiler "
      "(--wall-ns) to calibrate the host (docs/profiled_wall_time.md)",
      static_cast<double>(trace.iteration_wall_ns()) / 1e6,
      why == meta.end() ? "the importer did not say why" : why->second);
}

}  // namespace habitat
