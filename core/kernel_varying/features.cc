#include "core/kernel_varying/features.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "core/scaling/wave_scaling.h"

namespace habitat {
namespace kernel_varying {
namespace {

using habitat::v1::DeviceSpec;

// Per-GPU features of one side (origin or target), in feature_names() order.
inline constexpr size_t kSideFeatureCount = 7;

// Python's floor division (stride >= 1 here) of any integer.
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// conv_out() in features.py.
int64_t ConvOut(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  return std::max<int64_t>(1, FloorDiv(size + 2 * padding - kernel, stride) + 1);
}

double ElementBytes(MathMode mode) {
  return mode == MathMode::kFp16 || mode == MathMode::kBf16 ? 2 : 4;
}

absl::Status CheckConfig(Family family, const OpConfig& c) {
  for (size_t i = 0; i < kConfigColumnCount; ++i) {
    if (c[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(DescribeConfig(family, c), ": column ",
                                                     ConfigColumnName(i), " is negative"));
    }
  }
  const bool conv = family == Family::kConv2d || family == Family::kConvTranspose2d;
  if (conv && c[kStride] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeConfig(family, c), ": stride must be at least 1"));
  }
  return absl::OkStatus();
}

absl::Status DeviceError(const DeviceSpec& d, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("GPU \"", d.id(), "\": ", problem, " (kernel-varying features)"));
}

// The fields one side's features divide by or take the logarithm of.
absl::Status CheckDevice(const DeviceSpec& d, MathMode mode) {
  if (!(SustainedTflops(d, mode) > 0)) {
    return DeviceError(d, absl::StrCat("no sustained ", MathModeName(mode),
                                       " throughput (measured_", MathModeName(mode),
                                       "_gemm_tflops and its peak are 0): the GPU has no such "
                                       "units; pass the mode TargetMathMode picks"));
  }
  if (!(StreamingBandwidthGbps(d) > 0)) {
    return DeviceError(d,
                       "streaming_bandwidth_gbps, measured_memory_bandwidth_gbps and "
                       "memory_bandwidth_gbps are 0");
  }
  if (d.sm_count() == 0) return DeviceError(d, "sm_count is 0");
  if (d.l2_cache_bytes() == 0) return DeviceError(d, "l2_cache_bytes is 0");
  return absl::OkStatus();
}

// sustained_ns() in features.py: the pass's arithmetic at the sustained
// throughput and its DRAM bytes at the streaming bandwidth, in ns.
struct SustainedNs {
  double compute = 0;
  double memory = 0;
};
SustainedNs SustainedTimes(const Work& work, const DeviceSpec& d, MathMode mode) {
  return {work.flop / (SustainedTflops(d, mode) * 1e3), work.bytes / StreamingBandwidthGbps(d)};
}

// waves() in features.py: waves of tile x tile output tiles (at least one
// tile) over the GPU's SMs.
double Waves(const GemmDims& gemm, double tile, const DeviceSpec& d) {
  return std::max(1.0, gemm.batch * std::ceil(gemm.rows / tile) * std::ceil(gemm.cols / tile)) /
         static_cast<double>(d.sm_count());
}

// The pass's sustained roofline on one GPU (ns), at least 1.
double SustainedRooflineNs(const SustainedNs& times) {
  return std::max({times.compute, times.memory, 1.0});
}

// sides() in features.py: the pass's roofline on one GPU (ns) and its
// per-GPU features.
double Side(const Work& work, const GemmDims& gemm, const DeviceSpec& d, MathMode mode, double* x) {
  const SustainedNs times = SustainedTimes(work, d, mode);
  const auto [compute, memory] = times;
  const double roofline = SustainedRooflineNs(times);
  size_t i = 0;
  x[i++] = std::log2(std::max(compute, 1e-3) / std::max(memory, 1e-3));
  for (double tile : kTiles) {
    const double waves = Waves(gemm, tile, d);
    x[i++] = std::log2(waves);
    x[i++] = waves / std::ceil(waves);
  }
  x[i++] = std::log2(roofline);
  x[i++] = std::log2((work.bytes + 1.0) / static_cast<double>(d.l2_cache_bytes()));
  return roofline;
}

}  // namespace

absl::StatusOr<MathMode> ParseMathMode(absl::string_view name) {
  for (MathMode mode : kAllMathModes) {
    if (MathModeName(mode) == name) return mode;
  }
  std::vector<std::string> known;
  for (MathMode mode : kAllMathModes) known.emplace_back(MathModeName(mode));
  return absl::InvalidArgumentError(
      absl::StrCat("unknown math mode \"", name, "\" (known: ", absl::StrJoin(known, ", "), ")"));
}

const std::vector<std::string>& FeatureNames() {
  static const std::vector<std::string>* names = [] {
    auto* out = new std::vector<std::string>();
    for (Family f : kAllFamilies) out->push_back(absl::StrCat("family_", FamilyName(f)));
    out->push_back("backward");
    for (const char* side : {"origin", "target"}) {
      for (MathMode m : kAllMathModes) {
        out->push_back(absl::StrCat(side, "_mode_", MathModeName(m)));
      }
    }
    for (const char* v : {"batch", "rows", "cols", "reduction"}) {
      out->push_back(absl::StrCat("log2p_", v));
    }
    for (const char* side : {"origin", "target"}) {
      for (const char* x :
           {"log2_compute_over_memory", "log2_waves_128", "wave_quant_128", "log2_waves_64",
            "wave_quant_64", "log2_roofline_ns", "log2_bytes_over_l2"}) {
        out->push_back(absl::StrCat(side, "_", x));
      }
    }
    out->insert(out->end(), {"log2_origin_over_roofline", "log2_roofline_ratio"});
    return out;
  }();
  return *names;
}

absl::StatusOr<Work> ComputeWork(Family family, const OpConfig& c, MathMode mode, bool backward) {
  HABITAT_RETURN_IF_ERROR(CheckConfig(family, c));
  auto g = [&c](ConfigColumn column) { return static_cast<double>(c[column]); };
  // Evaluation order follows the Python expressions (left to right), so the
  // doubles are bit-identical.
  double flop = 0, words = 0;
  switch (family) {
    case Family::kLinear: {
      const double m = g(kM), n = g(kN), k = g(kK);
      flop = 2 * m * n * k;
      words = m * k + k * n + m * n;
      break;
    }
    case Family::kBmm: {
      const double b = g(kB), m = g(kM), n = g(kN), k = g(kK);
      flop = 2 * b * m * n * k;
      words = b * (m * k + k * n + m * n);
      break;
    }
    case Family::kConv2d:
    case Family::kConvTranspose2d: {
      const double b = g(kB), ci = g(kCIn), co = g(kCOut), kk = g(kKernel), s = g(kSize);
      double o;
      if (family == Family::kConv2d) {
        o = static_cast<double>(ConvOut(c[kSize], c[kKernel], c[kStride], c[kPadding]));
        flop = 2 * b * co * o * o * ci * kk * kk;
      } else {
        o = std::max(1.0, (s - 1) * g(kStride) - 2 * g(kPadding) + kk);
        flop = 2 * b * ci * s * s * co * kk * kk;
      }
      words = b * ci * s * s + b * co * o * o + ci * co * kk * kk;
      break;
    }
    case Family::kLstm: {
      const double b = g(kB), t = g(kSeq), i = g(kK), h = g(kN);
      const double layers = std::max(1.0, g(kLayers));
      flop = t * 8 * b * h * ((i + h) + (layers - 1) * 2 * h);
      words = t * b * (i + 4 * h * layers) + 4 * h * (i + h + (layers - 1) * 2 * h);
      break;
    }
    case Family::kSdpa: {
      const double b = g(kB), heads = g(kHeads), l = g(kSeq), d = g(kHeadDim);
      const double frac = c[kCausal] != 0 ? 0.5 : 1.0;
      flop = 4 * b * heads * l * l * d * frac;
      words = 4 * b * heads * l * d;
      break;
    }
  }
  if (backward) {
    flop = 2 * flop;
    words = 2 * words;
  }
  return Work{flop, words * ElementBytes(mode)};
}

absl::StatusOr<GemmDims> GemmView(Family family, const OpConfig& c) {
  HABITAT_RETURN_IF_ERROR(CheckConfig(family, c));
  auto g = [&c](ConfigColumn column) { return static_cast<double>(c[column]); };
  switch (family) {
    case Family::kLinear:
      return GemmDims{1.0, g(kM), g(kN), g(kK)};
    case Family::kBmm:
      return GemmDims{g(kB), g(kM), g(kN), g(kK)};
    case Family::kConv2d: {
      const double o = static_cast<double>(ConvOut(c[kSize], c[kKernel], c[kStride], c[kPadding]));
      return GemmDims{1.0, g(kB) * o * o, g(kCOut), g(kCIn) * g(kKernel) * g(kKernel)};
    }
    case Family::kConvTranspose2d:
      return GemmDims{1.0, g(kB) * g(kSize) * g(kSize), g(kCOut),
                      g(kCIn) * g(kKernel) * g(kKernel)};
    case Family::kLstm:
      return GemmDims{std::max(1.0, g(kLayers)) * g(kSeq), g(kB), 4 * g(kN), g(kK) + g(kN)};
    case Family::kSdpa:
      return GemmDims{g(kB) * g(kHeads), g(kSeq), g(kSeq), g(kHeadDim)};
  }
  return absl::InvalidArgumentError("unknown family");
}

double MinArithmeticFlop(Family family, const OpConfig& c, double flop) {
  if ((family != Family::kConv2d && family != Family::kConvTranspose2d) || c[kStride] != 1) {
    return flop;
  }
  const double kernel = static_cast<double>(c[kKernel]);
  if (kernel < 3) return flop;
  return flop / (kernel == 3 ? 4.0 : kernel * kernel / 2.0);
}

absl::StatusOr<double> FloorNs(Family family, const OpConfig& config, MathMode mode, bool backward,
                               const DeviceSpec& device) {
  HABITAT_ASSIGN_OR_RETURN(const Work work, ComputeWork(family, config, mode, backward));
  const double peak = PeakTflops(device, mode);
  if (peak <= 0) return 0.0;
  if (!(device.memory_bandwidth_gbps() > 0)) {
    return DeviceError(device, "memory_bandwidth_gbps is 0");
  }
  return std::max(MinArithmeticFlop(family, config, work.flop) / (peak * 1e3),
                  work.bytes / device.memory_bandwidth_gbps());
}

absl::StatusOr<double> ModeChangeExtraNs(Family family, const OpConfig& config,
                                         MathMode origin_mode, MathMode mode, bool backward,
                                         const DeviceSpec& origin, double typical) {
  HABITAT_RETURN_IF_ERROR(CheckDevice(origin, origin_mode));
  HABITAT_RETURN_IF_ERROR(CheckDevice(origin, mode));
  HABITAT_ASSIGN_OR_RETURN(const Work in_mode, ComputeWork(family, config, mode, backward));
  HABITAT_ASSIGN_OR_RETURN(const Work as_run, ComputeWork(family, config, origin_mode, backward));
  const double extra = SustainedTimes(in_mode, origin, mode).compute -
                       SustainedTimes(as_run, origin, origin_mode).compute;
  return typical * std::max(extra, 0.0);
}

namespace {

// The sustained roofline of a pass that passes the large-GEMM test in
// `mode`, else 0 (the mode and family are the caller's to check).
absl::StatusOr<double> LargeGemmComputeNs(Family family, const OpConfig& config, MathMode mode,
                                          bool backward, const DeviceSpec& device) {
  HABITAT_RETURN_IF_ERROR(CheckDevice(device, mode));
  HABITAT_ASSIGN_OR_RETURN(const Work work, ComputeWork(family, config, mode, backward));
  HABITAT_ASSIGN_OR_RETURN(const GemmDims gemm, GemmView(family, config));
  const auto [compute, memory] = SustainedTimes(work, device, mode);
  if (compute < kLargeGemmMinComputeOverMemory * memory ||
      Waves(gemm, kTiles[0], device) < kLargeGemmMinWaves || compute < kLargeGemmMinRooflineNs) {
    return 0.0;
  }
  return compute;
}

}  // namespace

absl::StatusOr<double> LargeGemmRooflineNs(Family family, const OpConfig& config, MathMode mode,
                                           bool backward, const DeviceSpec& device) {
  if (mode != MathMode::kFp32 && mode != MathMode::kTf32) return 0.0;
  if (family != Family::kLinear && family != Family::kBmm) return 0.0;
  return LargeGemmComputeNs(family, config, mode, backward, device);
}

absl::StatusOr<double> LargeTensorCoreGemmRooflineNs(Family family, const OpConfig& config,
                                                     MathMode mode, bool backward,
                                                     const DeviceSpec& device) {
  if (mode != MathMode::kFp16 && mode != MathMode::kBf16) return 0.0;
  // A convolution on tensor cores is an implicit GEMM (GemmView).
  if (family != Family::kLinear && family != Family::kBmm && family != Family::kConv2d) return 0.0;
  return LargeGemmComputeNs(family, config, mode, backward, device);
}

absl::StatusOr<double> SustainedRooflineNs(Family family, const OpConfig& config, MathMode mode,
                                           bool backward, const DeviceSpec& device) {
  HABITAT_ASSIGN_OR_RETURN(const Work work, ComputeWork(family, config, mode, backward));
  HABITAT_RETURN_IF_ERROR(CheckDevice(device, mode));
  return SustainedRooflineNs(SustainedTimes(work, device, mode));
}

absl::StatusOr<double> RooflineRatio(Family family, const OpConfig& config, MathMode origin_mode,
                                     MathMode target_mode, bool backward, const DeviceSpec& origin,
                                     const DeviceSpec& target) {
  HABITAT_ASSIGN_OR_RETURN(const Work origin_work,
                           ComputeWork(family, config, origin_mode, backward));
  HABITAT_ASSIGN_OR_RETURN(const Work target_work,
                           ComputeWork(family, config, target_mode, backward));
  HABITAT_RETURN_IF_ERROR(CheckDevice(origin, origin_mode));
  HABITAT_RETURN_IF_ERROR(CheckDevice(target, target_mode));
  return SustainedRooflineNs(SustainedTimes(target_work, target, target_mode)) /
         SustainedRooflineNs(SustainedTimes(origin_work, origin, origin_mode));
}

absl::Status AppendFeatures(Family family, const OpConfig& config, MathMode origin_mode,
                            MathMode target_mode, bool backward, const DeviceSpec& origin,
                            const DeviceSpec& target, double origin_ns, std::vector<float>* out,
                            double* roofline_ratio) {
  if (!std::isfinite(origin_ns)) {
    return absl::InvalidArgumentError(absl::StrCat("origin time of ",
                                                   DescribeConfig(family, config),
                                                   " is not a finite number of nanoseconds"));
  }
  HABITAT_ASSIGN_OR_RETURN(const Work origin_work,
                           ComputeWork(family, config, origin_mode, backward));
  HABITAT_ASSIGN_OR_RETURN(const Work target_work,
                           ComputeWork(family, config, target_mode, backward));
  HABITAT_ASSIGN_OR_RETURN(const GemmDims gemm, GemmView(family, config));
  HABITAT_RETURN_IF_ERROR(CheckDevice(origin, origin_mode));
  HABITAT_RETURN_IF_ERROR(CheckDevice(target, target_mode));

  double xo[kSideFeatureCount], xt[kSideFeatureCount];
  const double ro = Side(origin_work, gemm, origin, origin_mode, xo);
  const double rt = Side(target_work, gemm, target, target_mode, xt);

  std::array<double, kFeatureCount> x;
  size_t i = 0;
  for (Family f : kAllFamilies) x[i++] = f == family ? 1.0 : 0.0;
  x[i++] = backward ? 1.0 : 0.0;
  for (MathMode m : kAllMathModes) x[i++] = m == origin_mode ? 1.0 : 0.0;
  for (MathMode m : kAllMathModes) x[i++] = m == target_mode ? 1.0 : 0.0;
  for (double v : {gemm.batch, gemm.rows, gemm.cols, gemm.reduction}) {
    x[i++] = std::log2(1.0 + v);
  }
  for (double v : xo) x[i++] = v;
  for (double v : xt) x[i++] = v;
  x[i++] = std::log2(std::max(origin_ns, 1.0) / ro);
  x[i++] = std::log2(rt / ro);

  for (double v : x) out->push_back(static_cast<float>(v));
  *roofline_ratio = rt / ro;
  return absl::OkStatus();
}

}  // namespace kernel_varying
}  // namespace habitat
