// The warnings of a prediction: each has a kind (habitat.v1.Warning.kind),
// and this file is the one owner of their wording. PredictOnDevice counts
// each predicted operation in a WarningTally, which writes the device-level
// warnings, one per distinct case, with the share of the origin GPU time
// each concerns; the engine's own warnings (memory, prices, the host) are
// worded here too; and AddStructuredWarnings groups all of a response's
// warnings by kind, one line each for people.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/time_units.h"
#include "habitat/v1/device.pb.h"
#include "habitat/v1/prediction_service.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

struct VaryingNotes;

// The kinds: stable identifiers, never renamed once released (clients may
// key on them). WarningSummary has the sentence of each.
namespace warning_kind {
// Device-level (DevicePrediction.warnings).
inline constexpr char kOutOfMemory[] = "out_of_memory";
inline constexpr char kFsdpOutOfMemory[] = "fsdp_out_of_memory";
inline constexpr char kProfiledHostTimeline[] = "profiled_host_timeline";
inline constexpr char kProfilerCostEstimated[] = "profiler_cost_estimated";
inline constexpr char kUnscaledOperations[] = "unscaled_operations";
inline constexpr char kTargetOutsideTraining[] = "target_outside_training";
inline constexpr char kOriginOutsideTraining[] = "origin_outside_training";
inline constexpr char kMathModeFallback[] = "math_mode_fallback";
inline constexpr char kPredictedOnSibling[] = "predicted_on_sibling";
inline constexpr char kSplitAtRoofline[] = "split_at_roofline";
inline constexpr char kHardwareLimit[] = "hardware_limit";
inline constexpr char kAssumedGemmThroughput[] = "assumed_gemm_throughput";
inline constexpr char kGemmCeiling[] = "gemm_ceiling";
inline constexpr char kTf32SlowerThanFp32[] = "tf32_slower_than_fp32";
inline constexpr char kTestOnlyDevice[] = "test_only_device";
// Response-level (PredictResponse.warnings).
inline constexpr char kWallTimeFromGpuTime[] = "wall_time_from_gpu_time";
inline constexpr char kOriginHostBound[] = "origin_host_bound";
inline constexpr char kFsdpRank[] = "fsdp_rank";
inline constexpr char kNoMemoryPrediction[] = "no_memory_prediction";
inline constexpr char kSpotPricesMissing[] = "spot_prices_missing";
inline constexpr char kBatchScaled[] = "batch_scaled";
inline constexpr char kBatchDimensionMissing[] = "batch_dimension_missing";
inline constexpr char kNoBatchReruns[] = "no_batch_reruns";
}  // namespace warning_kind

// One sentence that holds for every GPU a warning of `kind` concerns; ""
// for a kind this build does not know.
absl::string_view WarningSummary(absl::string_view kind);

// A warning of the response as a whole, with the GPUs it concerns (none:
// the request itself, e.g. the trace).
struct KindedWarning {
  std::string kind;
  std::string text;
  std::vector<std::string> device_ids;
};

// Appends `text` to the prediction's warnings and `kind` to their kinds.
void AddDeviceWarning(absl::string_view kind, std::string text,
                      habitat::v1::DevicePrediction* prediction);

class WarningTally {
 public:
  // Counts one of the trace's operations as predicted on the target, with
  // what PredictOperation noted about it.
  void Add(const habitat::v1::OperationPrediction& op, const VaryingNotes& notes);

  // Appends the warnings to `prediction`, in a fixed order. Shares are of
  // `origin_total`, the origin GPU time of every operation (the kernels not
  // attributed to one included).
  void Write(const habitat::v1::DeviceSpec& origin, const habitat::v1::DeviceSpec& target,
             Nanoseconds origin_total, habitat::v1::DevicePrediction* prediction) const;

 private:
  // Math modes (MathMode values; warning_tally.cc checks the count).
  static constexpr size_t kModes = 4;

  // Operations of one kind of device warning and their origin time.
  struct OpShare {
    int operations = 0;
    Nanoseconds origin_ns = 0;
    void Add(Nanoseconds ns) {
      ++operations;
      origin_ns = SaturatingAdd(origin_ns, ns);
    }
  };
  using ByMode = std::array<OpShare, kModes>;

  // Math modes the origin ran in and the target has no units for.
  void WriteMathModeWarnings(const habitat::v1::DeviceSpec& origin, Nanoseconds origin_total,
                             habitat::v1::DevicePrediction* prediction) const;
  // GPUs outside the kernel-varying model's training data, and passes
  // predicted on a same-chip GPU.
  void WriteTrainingWarnings(const habitat::v1::DeviceSpec& origin, Nanoseconds origin_total,
                             habitat::v1::DevicePrediction* prediction) const;
  // Predictions moved to a hardware limit or a GEMM throughput.
  void WriteLimitWarnings(const habitat::v1::DeviceSpec& target, Nanoseconds origin_total,
                          habitat::v1::DevicePrediction* prediction) const;

  int unscaled_ops_ = 0;
  Nanoseconds unscaled_origin_ = 0;
  // Index = MathMode (the origin's mode for math-mode fallbacks and an
  // origin outside the training data, the target's for a target outside
  // it).
  ByMode fallback_;
  ByMode origin_untrained_;
  ByMode target_untrained_;
  ByMode split_;  // by the target's mode
  OpShare at_limit_;
  ByMode large_gemms_;  // by the mode predicted in
  OpShare capped_;
  OpShare fp32_bound_;
  OpShare via_sibling_;
  std::string sibling_;
};

// The origin GPU's warning when its wall time comes from a torch.profiler
// step, imported without a measured wall time (docs/profiled_wall_time.md):
// kProfiledHostTimeline where the importer could not estimate the
// profiler's own cost (metadata "kineto.host_timeline" is "profiled",
// "kineto.host_timeline_why" says why), kProfilerCostEstimated where it
// took its estimate out ("profiler cost removed"). The text starts with
// "profiled:", as the origin's table row is marked. nullopt for any other
// trace, or one without a host timeline (its wall time is the GPU time).
std::optional<KindedWarning> ProfiledHostTimelineWarning(const habitat::v1::Trace& trace);

// The engine's own warnings.

// A GPU the batch does not fit (prediction->memory().fits() false), at
// `batch`: says so on the prediction.
void AddOutOfMemoryWarning(uint32_t batch, habitat::v1::DevicePrediction* prediction);
// A fully sharded configuration `config` of `prediction` whose batch does
// not fit each GPU's `usable` bytes (fits_memory false), at `batch`; with a
// fit (`fit`) also what does.
void AddFsdpOutOfMemoryWarning(const habitat::v1::ParallelPrediction& config, uint32_t batch,
                               int64_t usable, bool fit, habitat::v1::DevicePrediction* prediction);
// The trace gives no memory model, for `reason`.
KindedWarning NoMemoryPredictionWarning(const std::string& reason);
// Asked for spot prices where the catalog has only on-demand ones.
std::optional<KindedWarning> MissingSpotPricesWarning(
    const habitat::v1::PriceCatalog& catalog,
    const std::vector<habitat::v1::DevicePrediction>& predictions);
// GPUs whose wall time is their GPU time (no replayed host timeline).
std::optional<KindedWarning> WallTimeFromGpuTimeWarning(
    const habitat::v1::Trace& trace, const std::vector<habitat::v1::DevicePrediction>& predictions);
// The traced iteration was host-bound.
std::optional<KindedWarning> OriginHostBoundWarning(const habitat::v1::Trace& traced);

// The trace is one rank of an FSDP step on `world` GPUs.
KindedWarning FsdpRankWarning(int world);

// Fills response->structured_warnings from its predictions' warnings (with
// their kinds) and `response_warnings` (the texts of response->warnings
// with their kinds): one Warning per kind, in WarningSummary's order of
// kinds; a warning without a kind (an older cache entry) is a kind of its
// own, after the known ones.
void AddStructuredWarnings(const std::vector<KindedWarning>& response_warnings,
                           habitat::v1::PredictResponse* response);

}  // namespace habitat
