// The feature vector of the kernel-varying predictor: the C++ twin of
// features() and work() in models/habitat_models/features.py (the spec).
// Arithmetic is in double, in the same order as the Python, and the result
// is rounded to float at the end, as the training code's numpy array is; the
// parity test (mlp_predictor_test.cc) replays the training side's reference
// rows. Change both sides or neither, and bump kFeatureVersion.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/mlp/op_config.h"
#include "habitat/v1/device.pb.h"

namespace habitat {
namespace mlp {

// FEATURE_VERSION in features.py; the model manifest must carry the same.
inline constexpr int kFeatureVersion = 1;
inline constexpr size_t kFeatureCount = 47;
// Output tile edge assumed for wave counts (TILE in features.py).
inline constexpr double kTile = 128;

// feature_names() of features.py, in order.
const std::vector<std::string>& FeatureNames();

// Peak throughput (TFLOP/s) the family runs at in `precision`: bf16 tensor
// cores (fp16's where the GPU has no bf16 ones, else fp32); fp32 convolutions
// and LSTMs run on TF32 tensor cores where there are some (cuDNN's default),
// other fp32 math does not (PyTorch's matmul default).
double PeakTflops(const habitat::v1::DeviceSpec& device, Family family, Precision precision);

// The minimum work of one pass, as work() in features.py.
struct Work {
  double flop = 0;
  double bytes = 0;  // DRAM bytes
  double tiles = 0;  // output tiles of kTile x kTile, at least 1
};
// INVALID_ARGUMENT for a negative column or a convolution with stride 0.
absl::StatusOr<Work> ComputeWork(Family family, const OpConfig& config, Precision precision,
                                 bool backward);

// The kFeatureCount features of one pass moved from `origin` to `target`,
// appended to `*out` (so callers build one flat batch). INVALID_ARGUMENT,
// naming the GPU and field, when a device lacks a spec the features take the
// logarithm of, or when the configuration or origin_ns is invalid; `*out` is
// then unchanged.
absl::Status AppendFeatures(Family family, const OpConfig& config, Precision precision,
                            bool backward, const habitat::v1::DeviceSpec& origin,
                            const habitat::v1::DeviceSpec& target, double origin_ns,
                            std::vector<float>* out);

// Convenience: one row.
absl::StatusOr<std::vector<float>> ComputeFeatures(Family family, const OpConfig& config,
                                                   Precision precision, bool backward,
                                                   const habitat::v1::DeviceSpec& origin,
                                                   const habitat::v1::DeviceSpec& target,
                                                   double origin_ns);

}  // namespace mlp
}  // namespace habitat
