#include "core/predict/warning_tally.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/devices/device_rates.h"
#include "core/kernel_varying/features.h"
#include "core/predict/ddp_prediction.h"
#include "core/predict/host_replay.h"
#include "core/predict/operation_scaling.h"
#include "core/pricing/price_catalog.h"

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

// Every kind with its summary, in the order structured warnings list them:
// what may change a decision first (a GPU that may not fit, times not
// predicted), then how the batch and the kernel-varying operations were
// predicted.
struct KindSummary {
  const char* kind;
  const char* summary;
};
constexpr KindSummary kKinds[] = {
    {warning_kind::kOutOfMemory, "the batch may not fit in the GPU's memory; not ranked"},
    {warning_kind::kFsdpOutOfMemory,
     "an FSDP configuration's batch may not fit in each GPU's memory (--fit finds one that does)"},
    {warning_kind::kProfiledHostTimeline,
     "wall times include the profiler's own host cost, which could not be taken out"},
    {warning_kind::kProfilerCostEstimated,
     "the origin's wall time is the profiled step's less the profiler's estimated cost"},
    {warning_kind::kUnscaledOperations,
     "some operations were carried over from the origin GPU unscaled (--breakdown lists them)"},
    {warning_kind::kWallTimeFromGpuTime,
     "no wall time predicted; throughput, cost and ranks use the GPU time"},
    {warning_kind::kOriginHostBound,
     "the traced iteration was host-bound; wall times assume a host as fast as the origin's"},
    {warning_kind::kFsdpRank,
     "the trace is one FSDP rank's: predicted as the single-GPU step its work amounts to; "
     "those rows are unranked"},
    {warning_kind::kNoMemoryPrediction,
     "no memory prediction; peak memory and whether the batch fits are unknown"},
    {warning_kind::kSpotPricesMissing,
     "the catalog has no spot price (on-demand only), so they are unpriced"},
    {warning_kind::kBatchScaled,
     "predicted at another batch than traced by scaling kernel times; more expected error"},
    {warning_kind::kBatchDimensionMissing,
     "part of the GPU time shows no batch dimension and keeps its traced time"},
    {warning_kind::kNoBatchReruns,
     "the trace has no re-runs at other batches, so GEMMs and convolutions scale by rule"},
    {warning_kind::kTargetOutsideTraining,
     "the kernel-varying model extrapolated beyond its training data; expect larger errors"},
    {warning_kind::kOriginOutsideTraining,
     "the origin GPU is outside the kernel-varying model's training data in some math modes"},
    {warning_kind::kMathModeFallback,
     "no tensor cores for the origin's math mode, so those operations run in fp32"},
    {warning_kind::kSplitAtRoofline,
     "some GEMMs unmeasured on the GPU were moved by its roofline and SM count x clock"},
    {warning_kind::kPredictedOnSibling,
     "some operations were predicted on a same-chip GPU and moved by the two GPUs' rooflines"},
    {warning_kind::kHardwareLimit,
     "some operations were raised to the GPU's datasheet peak FLOPS or memory bandwidth"},
    {warning_kind::kAssumedGemmThroughput,
     "no measured GEMM throughput; a share of the datasheet peak is assumed"},
    {warning_kind::kGemmCeiling, "some large GEMMs were lowered to the model's large-GEMM ceiling"},
    {warning_kind::kTf32SlowerThanFp32,
     "some TF32 operations were predicted slower than in fp32 and take the fp32 prediction"},
    {warning_kind::kTestOnlyDevice, "a test-only device entry, not a product"},
};
constexpr size_t kKindCount = sizeof(kKinds) / sizeof(kKinds[0]);

// The position of `kind` in kKinds; kKindCount for a kind it lacks.
size_t KindOrder(absl::string_view kind) {
  for (size_t i = 0; i < kKindCount; ++i) {
    if (kind == kKinds[i].kind) return i;
  }
  return kKindCount;
}

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1 << 30));
}

}  // namespace

static_assert(kernel_varying::kMathModeCount == 4,
              "WarningTally::kModes is the number of math modes");

absl::string_view WarningSummary(absl::string_view kind) {
  const size_t i = KindOrder(kind);
  return i < kKindCount ? kKinds[i].summary : "";
}

void AddDeviceWarning(absl::string_view kind, std::string text, DevicePrediction* prediction) {
  prediction->add_warnings(std::move(text));
  prediction->add_warning_kinds(std::string(kind));
}

void WarningTally::Add(const OperationPrediction& op, const VaryingNotes& notes) {
  const Nanoseconds origin_ns = op.origin_forward_ns() + op.origin_backward_ns();
  if (op.method() == v1::PREDICTION_METHOD_UNSCALED && origin_ns > 0) {
    ++unscaled_ops_;
    unscaled_origin_ += origin_ns;
  }
  if (notes.origin_mode.has_value() && *notes.origin_mode != *notes.target_mode) {
    fallback_[ModeIndex(*notes.origin_mode)].Add(origin_ns);
  }
  if (op.method() == v1::PREDICTION_METHOD_KERNEL_VARYING && notes.origin_outside_training) {
    origin_untrained_[ModeIndex(*notes.origin_mode)].Add(origin_ns);
  }
  if (op.method() == v1::PREDICTION_METHOD_KERNEL_VARYING && notes.target_outside_training) {
    target_untrained_[ModeIndex(*notes.target_mode)].Add(origin_ns);
  }
  if (op.method() == v1::PREDICTION_METHOD_KERNEL_VARYING && notes.split_at_roofline) {
    split_[ModeIndex(*notes.target_mode)].Add(origin_ns);
  }
  if (op.at_hardware_limit()) at_limit_.Add(origin_ns);
  if (notes.large_gemm) large_gemms_[ModeIndex(notes.large_gemm_mode)].Add(origin_ns);
  if (notes.fp32_bound) fp32_bound_.Add(origin_ns);
  if (op.method() == v1::PREDICTION_METHOD_KERNEL_VARYING && !notes.sibling.empty()) {
    via_sibling_.Add(origin_ns);
    sibling_ = notes.sibling;
  }
  if (notes.capped_at_ceiling) capped_.Add(origin_ns);
}

void WarningTally::Write(const DeviceSpec& origin, const DeviceSpec& target,
                         Nanoseconds origin_total, DevicePrediction* prediction) const {
  if (unscaled_ops_ > 0 && origin_total > 0) {
    AddDeviceWarning(
        warning_kind::kUnscaledOperations,
        absl::StrFormat(
            "%d operation(s), %.1f%% of the origin GPU time, were carried over unscaled "
            "(see the per-operation warnings with --breakdown)",
            unscaled_ops_, 100.0 * static_cast<double>(unscaled_origin_) / origin_total),
        prediction);
  }
  if (origin_total > 0) {
    WriteMathModeWarnings(origin, origin_total, prediction);
    WriteTrainingWarnings(origin, origin_total, prediction);
    WriteLimitWarnings(target, origin_total, prediction);
  }
  if (target.test_only()) {
    AddDeviceWarning(warning_kind::kTestOnlyDevice,
                     absl::StrCat(target.id(), " is a test-only device entry, not a product"),
                     prediction);
  }
}

void WarningTally::WriteMathModeWarnings(const DeviceSpec& origin, Nanoseconds origin_total,
                                         DevicePrediction* prediction) const {
  for (MathMode mode : kernel_varying::kAllMathModes) {
    const OpShare& share = fallback_[ModeIndex(mode)];
    if (share.operations == 0) continue;
    // TargetMathMode's rule: a GPU without units of the mode runs fp32.
    // The text does not name the target (the prediction is the target's),
    // so clients can print one line for every GPU it applies to.
    AddDeviceWarning(
        warning_kind::kMathModeFallback,
        absl::StrFormat(
            "%d operation(s), %.1f%% of the origin GPU time, ran in %s on %s and run in fp32 on "
            "the target GPU, which has no %s tensor cores",
            share.operations, Percent(share.origin_ns, origin_total), DisplayModeName(mode),
            origin.id(), DisplayModeName(mode)),
        prediction);
  }
}

void WarningTally::WriteTrainingWarnings(const DeviceSpec& origin, Nanoseconds origin_total,
                                         DevicePrediction* prediction) const {
  // One line per side the training data lacks, with the modes it lacks.
  struct Untrained {
    const char* kind;
    const ByMode* by_mode;
    const char* side;
    std::string gpu;
    const char* runs;
  };
  for (const Untrained& u : {Untrained{warning_kind::kTargetOutsideTraining, &target_untrained_,
                                       "target", "it", "run in there"},
                             Untrained{warning_kind::kOriginOutsideTraining, &origin_untrained_,
                                       "origin", origin.id(), "ran in"}}) {
    OpShare all;
    std::vector<std::string> modes;
    for (MathMode mode : kernel_varying::kAllMathModes) {
      const OpShare& share = (*u.by_mode)[ModeIndex(mode)];
      if (share.operations == 0) continue;
      all.operations += share.operations;
      all.origin_ns = SaturatingAdd(all.origin_ns, share.origin_ns);
      modes.push_back(absl::StrCat(DisplayModeName(mode), " for ", share.operations));
    }
    if (all.operations == 0) continue;
    AddDeviceWarning(
        u.kind,
        absl::StrFormat(
            "%d operation(s), %.1f%% of the origin GPU time, were predicted by the kernel-varying "
            "model with the %s GPU outside its training data (their operator types were not "
            "measured on %s in the math mode they %s: %s); it extrapolated from the GPUs' specs, "
            "expect larger errors there",
            all.operations, Percent(all.origin_ns, origin_total), u.side, u.gpu, u.runs,
            absl::StrJoin(modes, ", ")),
        prediction);
  }
  for (MathMode mode : kernel_varying::kAllMathModes) {
    const OpShare& share = split_[ModeIndex(mode)];
    if (share.operations == 0) continue;
    AddDeviceWarning(
        warning_kind::kSplitAtRoofline,
        absl::StrFormat(
            "%d operation(s), %.1f%% of the origin GPU time, are %s GEMMs the kernel-varying "
            "model has no measurements of on this GPU: the share their sustained roofline "
            "accounts for was moved by the roofline ratio, the rest by SM count x clock as "
            "latency (less certain than measured operator types)",
            share.operations, Percent(share.origin_ns, origin_total), DisplayModeName(mode)),
        prediction);
  }
  if (via_sibling_.operations > 0) {
    AddDeviceWarning(
        warning_kind::kPredictedOnSibling,
        absl::StrFormat(
            "%d operation(s), %.1f%% of the origin GPU time, were predicted by the kernel-varying "
            "model on %s, which has this GPU's chip and is in its training data, and moved here "
            "by the ratio of the two GPUs' sustained rooflines (their clocks, power limits or "
            "memory differ)",
            via_sibling_.operations, Percent(via_sibling_.origin_ns, origin_total), sibling_),
        prediction);
  }
}

void WarningTally::WriteLimitWarnings(const DeviceSpec& target, Nanoseconds origin_total,
                                      DevicePrediction* prediction) const {
  if (at_limit_.operations > 0) {
    AddDeviceWarning(
        warning_kind::kHardwareLimit,
        absl::StrFormat(
            "%d operation(s), %.1f%% of the origin GPU time, were predicted faster than the "
            "target GPU's datasheet peak FLOPS (in their math mode) or memory bandwidth allow, "
            "and were raised to that limit (at_hardware_limit)",
            at_limit_.operations, Percent(at_limit_.origin_ns, origin_total)),
        prediction);
  }
  for (MathMode mode : kernel_varying::kAllMathModes) {
    const OpShare& share = large_gemms_[ModeIndex(mode)];
    if (share.operations == 0 || MeasuredGemmTflops(target, mode) > 0) continue;
    AddDeviceWarning(
        warning_kind::kAssumedGemmThroughput,
        absl::StrFormat(
            "%d operation(s), %.1f%% of the origin GPU time, are large %s GEMMs on the target "
            "GPU, moved by its sustained %s GEMM throughput, which no measurement gives for "
            "it: %.2f of its datasheet peak is assumed",
            share.operations, Percent(share.origin_ns, origin_total), DisplayModeName(mode),
            DisplayModeName(mode), kDefaultSustainedFraction),
        prediction);
  }
  if (capped_.operations > 0) {
    AddDeviceWarning(
        warning_kind::kGemmCeiling,
        absl::StrFormat(
            "%d operation(s), %.1f%% of the origin GPU time, are large GEMMs on the target "
            "GPU whose origin time, moved by the two GPUs' sustained GEMM throughputs, came out "
            "slower than the GPUs measured run such GEMMs (the kernel-varying model's large-GEMM "
            "ceiling times the target's sustained GEMM time in their mode); they were lowered to "
            "that ceiling",
            capped_.operations, Percent(capped_.origin_ns, origin_total)),
        prediction);
  }
  if (fp32_bound_.operations > 0) {
    AddDeviceWarning(
        warning_kind::kTf32SlowerThanFp32,
        absl::StrFormat(
            "%d operation(s), %.1f%% of the origin GPU time, run in TF32 on the target GPU and "
            "were predicted slower there than in fp32; they take the fp32 prediction (the GPU's "
            "TF32 throughput is at least its fp32 one; the kernel-varying model has no TF32 "
            "measurements of any GPU but Hopper)",
            fp32_bound_.operations, Percent(fp32_bound_.origin_ns, origin_total)),
        prediction);
  }
}

void AddOutOfMemoryWarning(uint32_t batch, DevicePrediction* prediction) {
  const v1::MemoryPrediction& m = prediction->memory();
  AddDeviceWarning(
      warning_kind::kOutOfMemory,
      absl::StrCat("may run out of memory: batch ", batch, " needs about ",
                   GiB(m.peak_allocated_bytes()), " (+-",
                   absl::StrFormat("%.0f", m.expected_error_percent()),
                   "%), and with headroom for that error more than the ", GiB(m.usable_bytes()),
                   " this GPU leaves a process; ",
                   m.largest_fitting_batch() == 0
                       ? std::string("no batch fits")
                       : absl::StrCat("the largest batch that fits is ", m.largest_fitting_batch()),
                   "; it is not ranked"),
      prediction);
}

void AddFsdpOutOfMemoryWarning(const v1::ParallelPrediction& config, uint32_t batch, int64_t usable,
                               bool fit, DevicePrediction* prediction) {
  const uint32_t gpus = GpusInAll(config);
  std::string text = absl::StrCat("FSDP on ", gpus, " GPUs may run out of memory: batch ", batch,
                                  " per GPU needs about ", GiB(config.peak_memory_bytes_per_gpu()),
                                  " per GPU, with headroom for its error more than the ",
                                  GiB(usable), " each leaves a process");
  if (fit) {
    if (config.largest_fitting_batch() > 0) {
      absl::StrAppend(&text, "; the largest batch per GPU that fits is ",
                      config.largest_fitting_batch());
    } else if (config.needs_activation_checkpointing()) {
      absl::StrAppend(&text,
                      "; the sharded state fits but no batch's activations do: activation "
                      "checkpointing (not modelled) may make it fit");
    } else {
      absl::StrAppend(&text, "; no batch fits");
    }
    if (config.largest_fitting_batch() == 0 && config.fewest_gpus_to_fit() > 0) {
      absl::StrAppend(&text, " (it fits on ", config.fewest_gpus_to_fit(), " GPUs)");
    }
  }
  AddDeviceWarning(warning_kind::kFsdpOutOfMemory, std::move(text), prediction);
}

KindedWarning NoMemoryPredictionWarning(const std::string& reason) {
  return {warning_kind::kNoMemoryPrediction, absl::StrCat("no memory prediction: ", reason), {}};
}

// Asked for spot prices where the catalog has only on-demand ones (some
// clouds have no spot market): those GPUs come back unpriced, which reads as
// "not offered" unless said.
std::optional<KindedWarning> MissingSpotPricesWarning(
    const v1::PriceCatalog& catalog, const std::vector<DevicePrediction>& predictions) {
  std::vector<std::string> on_demand_only;
  for (const auto& p : predictions) {
    if (!p.has_price() &&
        ChoosePrice(catalog, p.device_id(), v1::PRICE_KIND_ON_DEMAND) != nullptr) {
      on_demand_only.push_back(p.device_id());
    }
  }
  if (on_demand_only.empty()) return std::nullopt;
  std::string text = absl::StrCat("catalog '", catalog.name(), "' has no spot price for ",
                                  absl::StrJoin(on_demand_only, ", "),
                                  " (on-demand prices only), so they are unpriced; ask for "
                                  "on-demand prices to rank them by cost");
  return KindedWarning{warning_kind::kSpotPricesMissing, std::move(text),
                       std::move(on_demand_only)};
}

// Without a replayed host timeline the GPU time stands in for the wall time,
// which flatters any GPU the host would keep waiting.
std::optional<KindedWarning> WallTimeFromGpuTimeWarning(
    const v1::Trace& trace, const std::vector<DevicePrediction>& predictions) {
  std::vector<std::string> unreplayed;
  for (const auto& p : predictions) {
    if (p.wall_time_is_gpu_time()) unreplayed.push_back(p.device_id());
  }
  if (unreplayed.empty()) return std::nullopt;
  const std::string which = unreplayed.size() == predictions.size()
                                ? std::string("any GPU")
                                : absl::StrJoin(unreplayed, ", ");
  std::string text = absl::StrCat(
      "no wall time could be predicted for ", which,
      HasHostTimeline(trace) ? " (the host timeline could not be replayed)"
                             : " (the trace has no host timeline)",
      ": throughput, cost and ranks take the GPU time as the wall time, as if the GPU never "
      "waited for the host");
  return KindedWarning{warning_kind::kWallTimeFromGpuTime, std::move(text), std::move(unreplayed)};
}

std::optional<KindedWarning> OriginHostBoundWarning(const v1::Trace& traced) {
  if (traced.iteration_gpu_busy_ns() <= 0 || traced.iteration_wall_ns() <= 0 ||
      !IsHostBound(traced.iteration_gpu_busy_ns(), traced.iteration_wall_ns())) {
    return std::nullopt;
  }
  std::string text = absl::StrFormat(
      "the origin iteration was host-bound (GPU busy %.0f%% of wall time): the wall time "
      "predicted for each GPU replays the origin's host timeline, assuming a host as fast "
      "as the origin's; throughput, cost and ranks follow it",
      100.0 * static_cast<double>(traced.iteration_gpu_busy_ns()) /
          static_cast<double>(traced.iteration_wall_ns()));
  return KindedWarning{warning_kind::kOriginHostBound, std::move(text), {}};
}

KindedWarning FsdpRankWarning(int world) {
  return KindedWarning{
      warning_kind::kFsdpRank,
      absl::StrFormat(
          "the trace is one rank of an FSDP step on %d GPUs: its collectives and FSDP2's copies "
          "were taken out and its optimizer scaled to the whole model, so each GPU's row is the "
          "single-GPU step (unranked: the model may not fit one GPU) and --parallel fsdp rows "
          "shard it again; its memory is read back as one GPU's from its sharded part",
          world),
      {}};
}

namespace {

// One kind's warnings while they are grouped: the GPUs, and each distinct
// text with its GPUs.
struct WarningGroup {
  std::string kind;
  std::vector<std::string> device_ids;
  std::vector<std::pair<std::string, std::vector<std::string>>> details;

  void Add(const std::string& text, const std::vector<std::string>& ids) {
    auto detail = std::find_if(details.begin(), details.end(),
                               [&text](const auto& d) { return d.first == text; });
    if (detail == details.end()) {
      detail = details.insert(details.end(), std::pair<std::string, std::vector<std::string>>(
                                                 text, std::vector<std::string>()));
    }
    for (const std::string& id : ids) {
      if (std::find(device_ids.begin(), device_ids.end(), id) == device_ids.end()) {
        device_ids.push_back(id);
      }
      if (std::find(detail->second.begin(), detail->second.end(), id) == detail->second.end()) {
        detail->second.push_back(id);
      }
    }
  }
};

// Groups warnings by kind; a warning without one is a group of its own
// text.
class WarningGrouper {
 public:
  void Add(const std::string& kind, const std::string& text, const std::vector<std::string>& ids) {
    auto group = std::find_if(groups_.begin(), groups_.end(), [&](const WarningGroup& g) {
      return kind.empty() ? g.kind.empty() && g.details.front().first == text : g.kind == kind;
    });
    if (group == groups_.end()) group = groups_.insert(groups_.end(), WarningGroup{kind, {}, {}});
    group->Add(text, ids);
  }

  // In kKinds' order; those without a known kind after, as they came.
  std::vector<WarningGroup> Sorted() && {
    std::stable_sort(groups_.begin(), groups_.end(),
                     [](const WarningGroup& a, const WarningGroup& b) {
                       return KindOrder(a.kind) < KindOrder(b.kind);
                     });
    return std::move(groups_);
  }

 private:
  std::vector<WarningGroup> groups_;
};

}  // namespace

void AddStructuredWarnings(const std::vector<KindedWarning>& response_warnings,
                           v1::PredictResponse* response) {
  WarningGrouper grouper;
  for (const DevicePrediction& p : response->predictions()) {
    for (int i = 0; i < p.warnings_size(); ++i) {
      grouper.Add(i < p.warning_kinds_size() ? p.warning_kinds(i) : std::string(), p.warnings(i),
                  {p.device_id()});
    }
  }
  for (const KindedWarning& w : response_warnings) grouper.Add(w.kind, w.text, w.device_ids);
  for (WarningGroup& group : std::move(grouper).Sorted()) {
    v1::Warning* warning = response->add_structured_warnings();
    const absl::string_view summary = WarningSummary(group.kind);
    warning->set_kind(group.kind);
    warning->set_summary(summary.empty() ? group.details.front().first : std::string(summary));
    for (std::string& id : group.device_ids) warning->add_device_ids(std::move(id));
    for (auto& [text, ids] : group.details) {
      v1::WarningDetail* detail = warning->add_details();
      detail->set_text(std::move(text));
      for (std::string& id : ids) detail->add_device_ids(std::move(id));
    }
  }
}

std::optional<KindedWarning> ProfiledHostTimelineWarning(const v1::Trace& trace) {
  const auto& meta = trace.metadata();
  auto timeline = meta.find("kineto.host_timeline");
  if (timeline == meta.end() || !HasHostTimeline(trace)) return std::nullopt;
  const double wall_ms = static_cast<double>(trace.iteration_wall_ns()) / 1e6;
  if (timeline->second == "profiled") {
    auto why = meta.find("kineto.host_timeline_why");
    return KindedWarning{
        warning_kind::kProfiledHostTimeline,
        absl::StrFormat(
            "profiled: this wall time is the profiled step's (%.3f ms), the profiler's own host "
            "cost included, which could not be estimated: %s. Every GPU's wall time, throughput, "
            "cost and rank carry that cost; pass the step's wall time measured without the "
            "profiler (--wall-ns) to calibrate the host (docs/profiled_wall_time.md)",
            wall_ms, why == meta.end() ? "the importer did not say why" : why->second),
        {}};
  }
  if (timeline->second != "profiler cost removed") return std::nullopt;
  auto step = meta.find("kineto.profiled_step_ns");
  int64_t step_ns = 0;
  if (step == meta.end() || !absl::SimpleAtoi(step->second, &step_ns)) step_ns = 0;
  return KindedWarning{
      warning_kind::kProfilerCostEstimated,
      absl::StrFormat(
          "profiled: this wall time (%.3f ms) is the profiled step's (%.3f ms) less the "
          "profiler's own host cost as estimated from the recorded ops and launches, not a "
          "measured one. Every GPU's wall time, throughput, cost and rank follow the estimate; "
          "pass the step's wall time measured without the profiler (--wall-ns) to calibrate the "
          "host (docs/profiled_wall_time.md)",
          wall_ms, static_cast<double>(step_ns) / 1e6),
      {}};
}

}  // namespace habitat
