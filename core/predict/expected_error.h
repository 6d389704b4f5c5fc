// The one owner of expected errors: how far off a prediction is likely to be,
// in percent of the predicted time. Kernel-varying operations the trained
// model predicts take the error its held-out evaluation measured (the model
// manifest's expected_error, VaryingPassPrediction::expected_error_percent);
// every other method takes one of the constants below, each from a measured
// evaluation where there is one.
#pragma once

#include "common/time_units.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

// Kernel-alike operations wave-scaled across GPU architectures: ScaleKernel's
// MAPE over all sizes, held out and leave-one-operator-out on the NeuSight
// GPUs and on H100 <-> H200 kernel durations (docs/kernel_alike_accuracy.md,
// "Summary").
inline constexpr double kKernelAlikeErrorPercent = 10.0;

// Kernel-varying passes the model does not cover (launch-bound, or no
// signature it understands), wave-scaled across architectures, where the
// target runs other kernels. Not measured for wave scaling itself; the
// closest measured method is scaling by the GPUs' peak-FLOPS ratio
// (docs/kernel_varying_accuracy.md, "peak FLOPS" column of the held-out
// tables; docs/accuracy.md, section 4).
inline constexpr double kKernelVaryingWaveScaledErrorPercent = 50.0;

// Targets with the origin's compute units (SameComputeUnits: H100 SXM <->
// H200, A100 40GB <-> 80GB): same kernels, every operation wave-scaled: the
// GPU time MAPE over the H100 <-> H200 fixtures and agent captures
// (docs/accuracy.md, sections 2 and 2d).
inline constexpr double kSameComputeUnitsErrorPercent = 2.0;

// Operations carried over from the origin unscaled: nothing bounds the
// error; a GPU twice as fast or twice as slow is off by 100 % or 50 %.
inline constexpr double kUnscaledErrorPercent = 100.0;

// Predicted-time-weighted mean of expected errors: sum(error_i * t_i) /
// sum(t_i). Each part's absolute error is about error_i * t_i, so this is
// the error of the sum when the parts' errors do not cancel (an upper
// estimate). Used over the passes of one operation and over the operations
// of one GPU.
class ExpectedErrorMean {
 public:
  void Add(Nanoseconds predicted_ns, double error_percent);
  // 0 when nothing with a positive time was added.
  double percent() const;

 private:
  double weighted_ = 0;
  double total_ns_ = 0;
};

// DevicePrediction.expected_error_percent: the predicted-time-weighted mean
// of the operations' expected_error_percent; 0 for the origin GPU (measured).
double IterationExpectedErrorPercent(const habitat::v1::DevicePrediction& prediction);

}  // namespace habitat
