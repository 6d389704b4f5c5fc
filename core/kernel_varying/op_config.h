// The vocabulary shared by the kernel-varying predictor's C++ side and its
// Python training code (models/habitat_models/features.py): operator
// families and the 16 configuration columns. Math modes are core/trace's
// MathMode.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace habitat {
namespace kernel_varying {

// Same order as FAMILIES in features.py (the one-hot features follow it).
enum class Family { kLinear, kBmm, kConv2d, kConvTranspose2d, kLstm, kSdpa };
inline constexpr size_t kFamilyCount = 6;
inline constexpr std::array<Family, kFamilyCount> kAllFamilies = {
    Family::kLinear,          Family::kBmm,  Family::kConv2d,
    Family::kConvTranspose2d, Family::kLstm, Family::kSdpa};

// Same order as CONFIG_COLUMNS in features.py. Columns a family does not use
// are 0.
enum ConfigColumn : size_t {
  kB,
  kM,
  kN,
  kK,
  kCIn,
  kCOut,
  kKernel,
  kStride,
  kPadding,
  kSize,
  kHeads,
  kSeq,
  kHeadDim,
  kLayers,
  kCausal,
  kBias,
  kConfigColumnCount,
};
using OpConfig = std::array<int64_t, kConfigColumnCount>;

// "linear", "bmm", "conv2d", "conv_transpose2d", "lstm", "sdpa".
absl::string_view FamilyName(Family family);
// INVALID_ARGUMENT naming the text when it is not a family name.
absl::StatusOr<Family> ParseFamily(absl::string_view name);

// "b", "m", ... as in features.py.
absl::string_view ConfigColumnName(size_t column);
// INVALID_ARGUMENT when the text is not a column name.
absl::StatusOr<size_t> ParseConfigColumn(absl::string_view name);

// Convolutions and RNNs run in cuDNN, whose TF32 switch differs from
// cuBLAS's (the cudnn_family argument of InferOpMathMode).
bool IsCudnnFamily(Family family);

// "conv2d{b=16 c_in=3 ...}" with the non-zero columns, for messages and tests.
std::string DescribeConfig(Family family, const OpConfig& config);

}  // namespace kernel_varying
}  // namespace habitat
