// The device-level warnings of one GPU's prediction: PredictOnDevice counts
// each predicted operation here, and the tally writes the warnings, one per
// distinct case, with the share of the origin GPU time each concerns. The
// one owner of their wording.
#pragma once

#include <optional>
#include <string>

#include "common/time_units.h"
#include "core/mlp/features.h"
#include "core/predict/operation_scaling.h"
#include "habitat/v1/device.pb.h"
#include "habitat/v1/prediction_service.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

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
  // Operations of one kind of device warning and their origin time.
  struct OpShare {
    int operations = 0;
    Nanoseconds origin_ns = 0;
    void Add(Nanoseconds ns) {
      ++operations;
      origin_ns = SaturatingAdd(origin_ns, ns);
    }
  };

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
  OpShare fallback_[mlp::kMathModeCount];
  OpShare origin_untrained_[mlp::kMathModeCount];
  OpShare target_untrained_[mlp::kMathModeCount];
  OpShare split_[mlp::kMathModeCount];  // by the target's mode
  OpShare at_limit_;
  OpShare large_gemms_[mlp::kMathModeCount];  // by the mode predicted in
  OpShare capped_;
  OpShare fp32_bound_;
  OpShare via_sibling_;
  std::string sibling_;
};

// The origin GPU's warning when the trace's host timeline is a profiled
// one with the profiler's own cost still in it: a torch.profiler trace
// imported without a measured wall time whose cost the importer could not
// estimate (metadata "kineto.host_timeline" is "profiled",
// "kineto.host_timeline_why" says why; docs/profiled_wall_time.md). Starts
// with "profiled:". nullopt for any other trace, or one without a host
// timeline (its wall time is the GPU time).
std::optional<std::string> ProfiledHostTimelineWarning(const habitat::v1::Trace& trace);

}  // namespace habitat
