// The features of the kernel-varying predictor, version 2: the C++ twin of
// models/habitat_models/features.py (the spec). Arithmetic is in double, in
// the same order as the Python, and the features are rounded to float at the
// end, as the training code's numpy array is; the parity test
// (kernel_varying_model_test.cc) replays the training side's reference rows.
// Change both sides or neither, and bump kFeatureVersion.
//
// The prediction of one pass moved from an origin GPU to a target GPU is
//   max(FloorNs(target), origin_ns * roofline_ratio * 2 ** model(features))
// where roofline_ratio is the ratio of the two GPUs' rooflines for the pass
// (each in the math mode the pass runs in there) and the model learns only
// the correction. A large fp32 GEMM on the target (LargeGemmRooflineNs)
// skips the model: the sustained throughputs it divides by are measured on
// such GEMMs, so the ratio alone moves it, capped at the model's
// large_gemm_ceiling times its sustained roofline. One in TF32 on the target,
// or in another mode on the origin, is large_gemm_typical times that
// roofline (VaryingPredictor).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/devices/device_rates.h"
#include "core/kernel_varying/op_config.h"
#include "core/trace/math_mode.h"
#include "habitat/v1/device.pb.h"

namespace habitat {
namespace kernel_varying {

// FEATURE_VERSION in features.py; the model manifest must carry the same.
inline constexpr int kFeatureVersion = 2;
inline constexpr size_t kFeatureCount = 35;

// MODES in features.py: the order of the mode one-hot features.
inline constexpr size_t kMathModeCount = 4;
inline constexpr std::array<MathMode, kMathModeCount> kAllMathModes = {
    MathMode::kFp32, MathMode::kTf32, MathMode::kFp16, MathMode::kBf16};
// Tables indexed by static_cast<size_t>(mode) rely on this.
static_assert(static_cast<size_t>(kAllMathModes[0]) == 0 &&
              static_cast<size_t>(kAllMathModes[1]) == 1 &&
              static_cast<size_t>(kAllMathModes[2]) == 2 &&
              static_cast<size_t>(kAllMathModes[3]) == 3);

// Output tile edges for wave counts (TILES): a large and a small
// cuBLAS/cuDNN tile.
inline constexpr std::array<double, 2> kTiles = {128, 64};

// The mode named by MathModeName ("fp32", "tf32", "fp16", "bf16");
// INVALID_ARGUMENT naming the text otherwise.
absl::StatusOr<MathMode> ParseMathMode(absl::string_view name);

// feature_names() of features.py, in order.
const std::vector<std::string>& FeatureNames();

// The minimum work of one pass (work() in features.py): FLOP and DRAM bytes
// the op must do, not what its kernels happen to do. INVALID_ARGUMENT for a
// negative column or a convolution with stride 0.
struct Work {
  double flop = 0;
  double bytes = 0;
};
absl::StatusOr<Work> ComputeWork(Family family, const OpConfig& config, MathMode mode,
                                 bool backward);

// The GEMM the op amounts to (gemm_view()): output rows x cols, `batch`
// times, each output summing `reduction` products. Errors as ComputeWork.
struct GemmDims {
  double batch = 0;
  double rows = 0;
  double cols = 0;
  double reduction = 0;
};
absl::StatusOr<GemmDims> GemmView(Family family, const OpConfig& config);

// A lower bound on a pass's arithmetic given its direct FLOP count
// (min_arithmetic_flop()): stride-1 convolutions with kernels of 3 or more
// may run Winograd or FFT algorithms; other ops do what `flop` says.
double MinArithmeticFlop(Family family, const OpConfig& config, double flop);

// The hard limit on a pass on `device` in `mode` (floor_ns()): its minimum
// arithmetic at the mode's datasheet peak, or its DRAM bytes at the
// datasheet bandwidth, whichever is longer; 0 when the GPU has no units of
// the mode (callers pass TargetMathMode's result). INVALID_ARGUMENT as
// ComputeWork, or when the GPU has no memory_bandwidth_gbps.
absl::StatusOr<double> FloorNs(Family family, const OpConfig& config, MathMode mode, bool backward,
                               const habitat::v1::DeviceSpec& device);

// What a pass `origin` ran in `origin_mode` would take longer there in
// `mode` (mode_change_extra_ns()): its extra arithmetic at the sustained
// throughputs times `typical` (the model's large_gemm_typical), at least 0.
// The predictor moves a pass whose math mode changes as one in `mode` on
// both GPUs, from its origin time plus this. Errors as ComputeWork, or
// INVALID_ARGUMENT when the GPU lacks a spec the throughputs need.
absl::StatusOr<double> ModeChangeExtraNs(Family family, const OpConfig& config,
                                         MathMode origin_mode, MathMode mode, bool backward,
                                         const habitat::v1::DeviceSpec& origin, double typical);

// A large GEMM (LARGE_GEMM_* in features.py): a linear or bmm pass on fp32
// tensors (fp32 or TF32) whose arithmetic at the sustained throughput takes
// at least kLargeGemmMinComputeOverMemory times its DRAM traffic, that fills
// at least kLargeGemmMinWaves waves of 128x128 output tiles and lasts at
// least kLargeGemmMinRooflineNs. The sustained throughput is measured on
// such GEMMs, so they run close to it on every GPU measured, and the served
// model caps their predictions at a multiple of it.
inline constexpr double kLargeGemmMinComputeOverMemory = 4.0;
inline constexpr double kLargeGemmMinWaves = 4.0;
inline constexpr double kLargeGemmMinRooflineNs = 1e5;

// The sustained roofline (ns) of a pass that is a large GEMM on fp32
// tensors (on CUDA cores or in TF32) on `device`, else 0
// (large_gemm_roofline_ns()). Errors as ComputeWork, or
// INVALID_ARGUMENT when the GPU lacks the specs the roofline divides by.
absl::StatusOr<double> LargeGemmRooflineNs(Family family, const OpConfig& config, MathMode mode,
                                           bool backward, const habitat::v1::DeviceSpec& device);

// The same test for a linear, bmm or convolution pass (an implicit GEMM,
// GemmView) in fp16 or bf16 on tensor cores: its sustained roofline on
// `device`, else 0. Not a model feature (the
// training side has no twin): the predictor moves such a pass by the
// sustained-roofline ratio alone, the origin's distance from its roofline
// carried over, where the model has no measurements of the target in that
// mode and would extrapolate (docs/mixed_precision_accuracy.md).
absl::StatusOr<double> LargeTensorCoreGemmRooflineNs(Family family, const OpConfig& config,
                                                     MathMode mode, bool backward,
                                                     const habitat::v1::DeviceSpec& device);

// The pass's sustained roofline on `device` in `mode` (ns, at least 1): its
// arithmetic at the sustained throughput or its DRAM bytes at the streaming
// bandwidth, whichever is longer. Errors as RooflineRatio.
absl::StatusOr<double> SustainedRooflineNs(Family family, const OpConfig& config, MathMode mode,
                                           bool backward, const habitat::v1::DeviceSpec& device);

// The ratio of the pass's sustained rooflines on `target` (in
// `target_mode`) and on `origin` (in `origin_mode`), roofline_ratio() in
// features.py; AppendFeatures gives it with the features. Errors as
// AppendFeatures.
absl::StatusOr<double> RooflineRatio(Family family, const OpConfig& config, MathMode origin_mode,
                                     MathMode target_mode, bool backward,
                                     const habitat::v1::DeviceSpec& origin,
                                     const habitat::v1::DeviceSpec& target);

// Appends the kFeatureCount features of one pass moved from `origin` (run in
// `origin_mode`) to `target` (run in `target_mode`) to `*out`, so callers
// build one flat batch, and sets `*roofline_ratio` (target roofline over
// origin roofline). INVALID_ARGUMENT, naming the GPU and field, when a
// device lacks a spec the features divide by or take the logarithm of
// (sm_count, l2_cache_bytes, a bandwidth), when the mode has no sustained
// throughput on the GPU (e.g. tf32 on a V100: pass TargetMathMode's result),
// or when the configuration or origin_ns is invalid; `*out` is then
// unchanged.
absl::Status AppendFeatures(Family family, const OpConfig& config, MathMode origin_mode,
                            MathMode target_mode, bool backward,
                            const habitat::v1::DeviceSpec& origin,
                            const habitat::v1::DeviceSpec& target, double origin_ns,
                            std::vector<float>* out, double* roofline_ratio);

}  // namespace kernel_varying
}  // namespace habitat
