#include "core/mlp/features.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace habitat {
namespace mlp {
namespace {

using habitat::v1::DeviceSpec;

bool IsCudnnFamily(Family family) {
  return family == Family::kConv2d || family == Family::kConvTranspose2d || family == Family::kLstm;
}

// math.ceil(rows / TILE) * math.ceil(cols / TILE); exact in double for any
// realistic size (< 2^53).
double Tiles(double rows, double cols) { return std::ceil(rows / kTile) * std::ceil(cols / kTile); }

double Log2p(double x) { return std::log2(1.0 + std::max(0.0, x)); }

// Python's floor division of non-negative stride (>= 1) into any integer.
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t ConvOut(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  return std::max<int64_t>(1, FloorDiv(size + 2 * padding - kernel, stride) + 1);
}

absl::Status CheckDevice(const DeviceSpec& d, Family family, Precision precision) {
  auto bad = [&](absl::string_view field, double value) {
    return absl::InvalidArgumentError(absl::StrCat("GPU \"", d.id(), "\": ", field,
                                                   " must be positive for the kernel-"
                                                   "varying features, got ",
                                                   value));
  };
  const double peak = PeakTflops(d, family, precision);
  if (!(peak > 0)) {
    return bad(absl::StrCat("the peak TFLOP/s of ", PrecisionName(precision), " (peak_*_tflops)"),
               peak);
  }
  if (!(d.memory_bandwidth_gbps() > 0)) {
    return bad("memory_bandwidth_gbps", d.memory_bandwidth_gbps());
  }
  if (d.sm_count() == 0) return bad("sm_count", 0);
  if (d.l2_cache_bytes() == 0) return bad("l2_cache_bytes", 0);
  if (d.boost_clock_mhz() == 0) return bad("boost_clock_mhz", 0);
  return absl::OkStatus();
}

void AppendDevice(const DeviceSpec& d, Family family, Precision precision, std::vector<double>* x) {
  x->push_back(std::log2(PeakTflops(d, family, precision)));
  x->push_back(std::log2(d.memory_bandwidth_gbps()));
  x->push_back(std::log2(static_cast<double>(d.sm_count())));
  x->push_back(std::log2(static_cast<double>(d.l2_cache_bytes()) / 1048576.0));
  x->push_back(std::log2(static_cast<double>(d.boost_clock_mhz())));
  x->push_back(static_cast<double>(d.compute_capability_major()) +
               static_cast<double>(d.compute_capability_minor()) / 10.0);
}

double RooflineNs(const DeviceSpec& d, Family family, Precision precision, double flop,
                  double bytes) {
  const double compute = flop / (PeakTflops(d, family, precision) * 1e3);
  const double memory = bytes / d.memory_bandwidth_gbps();
  return std::max({compute, memory, 1.0});
}

}  // namespace

const std::vector<std::string>& FeatureNames() {
  static const std::vector<std::string>* names = [] {
    auto* out = new std::vector<std::string>();
    for (Family f : kAllFamilies) out->push_back(absl::StrCat("family_", FamilyName(f)));
    out->push_back("backward");
    out->push_back("bf16");
    for (size_t c = 0; c < kConfigColumnCount; ++c) {
      out->push_back(absl::StrCat("log2p_", ConfigColumnName(c)));
    }
    out->insert(out->end(), {"log2p_flop", "log2p_bytes", "log2_intensity"});
    for (const char* side : {"origin", "target"}) {
      for (const char* x : {"log2_peak_tflops", "log2_bandwidth_gbps", "log2_sm_count",
                            "log2_l2_mib", "log2_clock_mhz", "compute_capability"}) {
        out->push_back(absl::StrCat(side, "_", x));
      }
    }
    out->insert(out->end(), {"log2_roofline_origin_ns", "log2_roofline_target_ns",
                             "log2_roofline_ratio", "log2_waves_origin", "log2_waves_target",
                             "wave_quant_origin", "wave_quant_target", "log2_origin_ns"});
    return out;
  }();
  return *names;
}

double PeakTflops(const DeviceSpec& device, Family family, Precision precision) {
  if (precision == Precision::kBf16) {
    const double peak = device.peak_bf16_tensor_tflops() != 0 ? device.peak_bf16_tensor_tflops()
                                                              : device.peak_fp16_tensor_tflops();
    return peak != 0 ? peak : device.peak_fp32_tflops();
  }
  if (IsCudnnFamily(family) && device.peak_tf32_tflops() > 0) {
    return device.peak_tf32_tflops();
  }
  return device.peak_fp32_tflops();
}

absl::StatusOr<Work> ComputeWork(Family family, const OpConfig& c, Precision precision,
                                 bool backward) {
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
  const double elem = precision == Precision::kBf16 ? 2 : 4;
  auto g = [&c](ConfigColumn column) { return static_cast<double>(c[column]); };
  // Evaluation order follows the Python expressions (left to right), so the
  // doubles are bit-identical.
  double flop = 0, words = 0, tiles = 0;
  switch (family) {
    case Family::kLinear: {
      const double m = g(kM), n = g(kN), k = g(kK);
      flop = 2 * m * n * k;
      words = m * k + k * n + m * n;
      tiles = Tiles(m, n);
      break;
    }
    case Family::kBmm: {
      const double b = g(kB), m = g(kM), n = g(kN), k = g(kK);
      flop = 2 * b * m * n * k;
      words = b * (m * k + k * n + m * n);
      tiles = b * Tiles(m, n);
      break;
    }
    case Family::kConv2d:
    case Family::kConvTranspose2d: {
      const double b = g(kB), ci = g(kCIn), co = g(kCOut), kk = g(kKernel), s = g(kSize);
      double o, rows;
      if (family == Family::kConv2d) {
        o = static_cast<double>(ConvOut(c[kSize], c[kKernel], c[kStride], c[kPadding]));
        flop = 2 * b * co * o * o * ci * kk * kk;
        rows = b * o * o;
      } else {
        o = std::max(1.0, (s - 1) * g(kStride) - 2 * g(kPadding) + kk);
        flop = 2 * b * ci * s * s * co * kk * kk;
        rows = b * s * s;
      }
      words = b * ci * s * s + b * co * o * o + ci * co * kk * kk;
      tiles = Tiles(rows, co);
      break;
    }
    case Family::kLstm: {
      const double b = g(kB), t = g(kSeq), i = g(kK), h = g(kN);
      const double layers = std::max(1.0, g(kLayers));
      flop = t * 8 * b * h * ((i + h) + (layers - 1) * 2 * h);
      words = t * b * (i + 4 * h * layers) + 4 * h * (i + h + (layers - 1) * 2 * h);
      tiles = Tiles(b, 4 * h);
      break;
    }
    case Family::kSdpa: {
      const double b = g(kB), heads = g(kHeads), l = g(kSeq), d = g(kHeadDim);
      const double frac = c[kCausal] != 0 ? 0.5 : 1.0;
      flop = 4 * b * heads * l * l * d * frac;
      words = 4 * b * heads * l * d;
      tiles = b * heads * std::ceil(l / kTile);
      break;
    }
  }
  if (backward) {
    flop = 2 * flop;
    words = 2 * words;
  }
  return Work{flop, words * elem, std::max(1.0, tiles)};
}

absl::Status AppendFeatures(Family family, const OpConfig& config, Precision precision,
                            bool backward, const DeviceSpec& origin, const DeviceSpec& target,
                            double origin_ns, std::vector<float>* out) {
  if (!std::isfinite(origin_ns)) {
    return absl::InvalidArgumentError(absl::StrCat("origin time of ",
                                                   DescribeConfig(family, config),
                                                   " is not a finite number of nanoseconds"));
  }
  auto work = ComputeWork(family, config, precision, backward);
  if (!work.ok()) return work.status();
  if (auto s = CheckDevice(origin, family, precision); !s.ok()) return s;
  if (auto s = CheckDevice(target, family, precision); !s.ok()) return s;
  const double flop = work->flop, bytes = work->bytes, tiles = work->tiles;

  std::vector<double> x;
  x.reserve(kFeatureCount);
  for (Family f : kAllFamilies) x.push_back(f == family ? 1.0 : 0.0);
  x.push_back(backward ? 1.0 : 0.0);
  x.push_back(precision == Precision::kBf16 ? 1.0 : 0.0);
  for (size_t c = 0; c < kConfigColumnCount; ++c) {
    x.push_back(Log2p(static_cast<double>(config[c])));
  }
  x.push_back(Log2p(flop));
  x.push_back(Log2p(bytes));
  x.push_back(std::log2((flop + 1.0) / (bytes + 1.0)));
  AppendDevice(origin, family, precision, &x);
  AppendDevice(target, family, precision, &x);
  const double ro = RooflineNs(origin, family, precision, flop, bytes);
  const double rt = RooflineNs(target, family, precision, flop, bytes);
  x.push_back(std::log2(ro));
  x.push_back(std::log2(rt));
  x.push_back(std::log2(rt / ro));
  for (const DeviceSpec* d : {&origin, &target}) {
    x.push_back(std::log2(tiles / static_cast<double>(d->sm_count())));
  }
  for (const DeviceSpec* d : {&origin, &target}) {
    const double waves = tiles / static_cast<double>(d->sm_count());
    x.push_back(std::ceil(waves) / waves);
  }
  x.push_back(std::log2(std::max(origin_ns, 1.0)));

  for (double v : x) out->push_back(static_cast<float>(v));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> ComputeFeatures(Family family, const OpConfig& config,
                                                   Precision precision, bool backward,
                                                   const DeviceSpec& origin,
                                                   const DeviceSpec& target, double origin_ns) {
  std::vector<float> out;
  out.reserve(kFeatureCount);
  auto status =
      AppendFeatures(family, config, precision, backward, origin, target, origin_ns, &out);
  if (!status.ok()) return status;
  return out;
}

}  // namespace mlp
}  // namespace habitat
