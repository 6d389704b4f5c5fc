#include "core/scaling/wave_scaling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "core/scaling/occupancy.h"

namespace habitat {
namespace {

using habitat::v1::DeviceSpec;
using habitat::v1::Kernel;

// A host-timed origin is taken to sit on its floor when its work (time less
// the fixed part) exceeds what its DRAM traffic explains by this factor while
// its time is within this multiple of the GPU's typical floor. Operators'
// floors differ (layer norm's is ~1.6x an add's on the same host), hence
// the band rather than an exact match.
constexpr double kFloorWorkMargin = 1.25;
constexpr double kFloorBand = 2.0;
// Without counters only a time this close to the typical floor says "floor".
constexpr double kFloorBandWithoutCounters = 1.1;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

absl::Status CheckDevice(const DeviceSpec& device, const char* role) {
  if (device.sm_count() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(role, " device '", device.id(), "': sm_count is 0"));
  }
  if (!(device.memory_bandwidth_gbps() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(role, " device '", device.id(), "': memory_bandwidth_gbps must be positive"));
  }
  if (device.boost_clock_mhz() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(role, " device '", device.id(), "': boost_clock_mhz is 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckKernel(const Kernel& kernel) {
  if (kernel.duration_ns() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel '", kernel.name(), "': duration_ns = ", kernel.duration_ns(), " is negative"));
  }
  return GridBlocks(kernel).status();
}

uint64_t DramBytes(const Kernel& kernel) {
  return kernel.counters().dram_read_bytes() + kernel.counters().dram_write_bytes();
}
uint64_t Flops(const Kernel& kernel) {
  const auto& c = kernel.counters();
  return c.flop_fp64() + c.flop_fp32() + c.flop_fp16() + c.flop_bf16() + c.flop_tensor();
}

// FLOP/s the kernel's FLOPs run at on `device`.
double PeakFlops(const Kernel& kernel, const DeviceSpec& device) {
  if (kernel.counters().flop_tensor() > 0 && PeakTflops(device, MathMode::kFp16) > 0) {
    return PeakTflops(device, MathMode::kFp16) * 1e12;
  }
  return PeakTflops(device, MathMode::kFp32) * 1e12;
}

struct Waves {
  int64_t origin = 0;
  int64_t target = 0;
};

absl::StatusOr<Waves> CountWaves(const Kernel& kernel, const DeviceSpec& origin,
                                 const DeviceSpec& target) {
  HABITAT_ASSIGN_OR_RETURN(const int64_t blocks, GridBlocks(kernel));
  HABITAT_ASSIGN_OR_RETURN(const int64_t wave_o, WaveSize(kernel, origin));
  HABITAT_ASSIGN_OR_RETURN(const int64_t wave_d, WaveSize(kernel, target));
  return Waves{CeilDiv(blocks, wave_o), CeilDiv(blocks, wave_d)};
}

}  // namespace

const char* ScalingBranchName(ScalingBranch branch) {
  switch (branch) {
    case ScalingBranch::kPaperEq2:
      return "paper_eq2";
    case ScalingBranch::kWorkScaled:
      return "work_scaled";
    case ScalingBranch::kWorkFromCounters:
      return "work_from_counters";
    case ScalingBranch::kTargetFloor:
      return "target_floor";
  }
  return "unknown";
}

absl::StatusOr<ScalingConstants> ResolveScalingConstants(const DeviceSpec& device,
                                                         TimeBasis basis) {
  if (!(device.memory_bandwidth_gbps() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", device.id(), "': memory_bandwidth_gbps must be positive"));
  }
  if (device.streaming_bandwidth_gbps() < 0 || device.op_fixed_latency_ns() < 0 ||
      device.op_latency_floor_ns() < 0 || device.kernel_fixed_latency_ns() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", device.id(),
                     "': scaling constants (streaming_bandwidth_gbps, op_fixed_latency_ns, "
                     "op_latency_floor_ns, kernel_fixed_latency_ns) must not be negative"));
  }
  ScalingConstants c;
  c.clock_mhz = SustainedClockMhz(device);
  c.streaming_bandwidth_is_default = StreamingBandwidthIsDefault(device);
  c.streaming_bandwidth_gbps = StreamingBandwidthGbps(device);
  if (basis == TimeBasis::kKernelDuration) {
    c.fixed_is_default = device.kernel_fixed_latency_ns() == 0;
    c.fixed_ns =
        c.fixed_is_default ? kDefaultKernelFixedLatencyNs : device.kernel_fixed_latency_ns();
    return c;
  }
  c.fixed_is_default = device.op_fixed_latency_ns() == 0;
  c.fixed_ns = c.fixed_is_default ? kDefaultOpFixedLatencyNs : device.op_fixed_latency_ns();
  c.floor_is_default = device.op_latency_floor_ns() == 0;
  c.floor_ns = c.floor_is_default ? kDefaultOpLatencyFloorNs : device.op_latency_floor_ns();
  return c;
}

double RooflineGamma(double intensity, double ridge_point) {
  if (intensity <= ridge_point) return 1.0 - 0.5 * intensity / ridge_point;
  return 0.5 * ridge_point / intensity;
}

absl::StatusOr<double> KernelGamma(const Kernel& kernel, const DeviceSpec& device) {
  if (!kernel.has_counters()) return 1.0;
  const uint64_t flops = Flops(kernel);
  const uint64_t bytes = DramBytes(kernel);
  if (flops == 0) return 1.0;
  if (bytes == 0) return 0.0;
  const double peak = PeakFlops(kernel, device);
  if (!(peak > 0) || !(device.memory_bandwidth_gbps() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", device.id(),
                     "': the roofline needs peak_fp32_tflops and memory_bandwidth_gbps"));
  }
  const double ridge = peak / (device.memory_bandwidth_gbps() * 1e9);
  return RooflineGamma(static_cast<double>(flops) / static_cast<double>(bytes), ridge);
}

absl::StatusOr<int64_t> GridBlocks(const Kernel& kernel) {
  const auto check = [&kernel](const char* field, uint32_t v) -> absl::Status {
    if (v == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel '", kernel.name(), "': ", field, " is 0"));
    }
    return absl::OkStatus();
  };
  HABITAT_RETURN_IF_ERROR(check("grid.x", kernel.grid().x()));
  HABITAT_RETURN_IF_ERROR(check("grid.y", kernel.grid().y()));
  HABITAT_RETURN_IF_ERROR(check("grid.z", kernel.grid().z()));
  HABITAT_RETURN_IF_ERROR(check("block.x", kernel.block().x()));
  HABITAT_RETURN_IF_ERROR(check("block.y", kernel.block().y()));
  HABITAT_RETURN_IF_ERROR(check("block.z", kernel.block().z()));
  return int64_t{kernel.grid().x()} * kernel.grid().y() * kernel.grid().z();
}

absl::StatusOr<int64_t> WaveSize(const Kernel& kernel, const DeviceSpec& device) {
  HABITAT_RETURN_IF_ERROR(GridBlocks(kernel).status());
  const int64_t threads = int64_t{kernel.block().x()} * kernel.block().y() * kernel.block().z();
  KernelResources resources;
  resources.threads_per_block = static_cast<int>(std::min<int64_t>(threads, 1 << 30));
  resources.registers_per_thread = static_cast<int>(kernel.registers_per_thread());
  resources.static_shared_memory_bytes = kernel.static_shared_memory_bytes();
  resources.dynamic_shared_memory_bytes = kernel.dynamic_shared_memory_bytes();
  absl::StatusOr<int> blocks_per_sm = MaxActiveBlocksPerSm(device, resources);
  if (!blocks_per_sm.ok()) {
    return absl::Status(
        blocks_per_sm.status().code(),
        absl::StrCat("kernel '", kernel.name(), "': ", blocks_per_sm.status().message()));
  }
  if (*blocks_per_sm == 0) {
    return absl::InvalidArgumentError(absl::StrCat("kernel '", kernel.name(),
                                                   "' cannot be resident on device '", device.id(),
                                                   "' (occupancy 0 blocks per SM)"));
  }
  return int64_t{*blocks_per_sm} * device.sm_count();
}

bool SameComputeUnits(const DeviceSpec& a, const DeviceSpec& b) {
  const auto close = [](double x, double y) {
    return std::abs(x - y) <= 0.005 * std::max(std::abs(x), std::abs(y));
  };
  return !a.architecture().empty() && a.architecture() == b.architecture() &&
         a.compute_capability_major() == b.compute_capability_major() &&
         a.compute_capability_minor() == b.compute_capability_minor() && a.sm_count() > 0 &&
         a.sm_count() == b.sm_count() && a.boost_clock_mhz() == b.boost_clock_mhz() &&
         close(a.peak_fp32_tflops(), b.peak_fp32_tflops()) &&
         close(a.peak_tf32_tflops(), b.peak_tf32_tflops()) &&
         close(a.peak_fp16_tensor_tflops(), b.peak_fp16_tensor_tflops()) &&
         close(a.peak_bf16_tensor_tflops(), b.peak_bf16_tensor_tflops());
}

absl::StatusOr<KernelPrediction> PaperWaveScaling(const Kernel& kernel, const DeviceSpec& origin,
                                                  const DeviceSpec& target) {
  HABITAT_RETURN_IF_ERROR(CheckKernel(kernel));
  HABITAT_RETURN_IF_ERROR(CheckDevice(origin, "origin"));
  HABITAT_RETURN_IF_ERROR(CheckDevice(target, "target"));
  HABITAT_ASSIGN_OR_RETURN(const double gamma, KernelGamma(kernel, target));
  HABITAT_ASSIGN_OR_RETURN(const int64_t wave_o, WaveSize(kernel, origin));
  HABITAT_ASSIGN_OR_RETURN(const int64_t wave_d, WaveSize(kernel, target));
  HABITAT_ASSIGN_OR_RETURN(const int64_t blocks, GridBlocks(kernel));

  KernelPrediction p;
  p.gamma = gamma;
  p.branch = ScalingBranch::kPaperEq2;
  p.origin_waves = CeilDiv(blocks, wave_o);
  p.target_waves = CeilDiv(blocks, wave_d);
  const double wave_ratio =
      static_cast<double>(p.target_waves) / static_cast<double>(p.origin_waves);
  const double memory = (origin.memory_bandwidth_gbps() * static_cast<double>(wave_d)) /
                        (target.memory_bandwidth_gbps() * static_cast<double>(wave_o));
  const double clock =
      static_cast<double>(origin.boost_clock_mhz()) / static_cast<double>(target.boost_clock_mhz());
  const double t = wave_ratio * std::pow(memory, gamma) * std::pow(clock, 1.0 - gamma) *
                   static_cast<double>(kernel.duration_ns());
  p.predicted_ns = std::llround(t);
  return p;
}

// The model. With F the fixed part, L the floor and S the streaming
// bandwidth of each GPU (ResolveScalingConstants):
//   work_o  = max(T_o - F_o, 0)
//   work_d  = work_o * (S_o/S_d)^g * (ceil(B/W_d)/ceil(B/W_o) * C_o/C_d)^(1-g)
//   T_d     = max(F_d + work_d, floor_d)      (floor only for host-timed ops)
// Why it differs from Eq. 2:
// - A fixed part does not scale with bandwidth; scaling it as Eq. 2 does is
//   what makes small kernels' errors large.
// - Memory-bound work scales with achieved, not datasheet, bandwidth (the
//   fraction differs by GPU, 0.75 to 0.92 measured), and without wave
//   quantization: blocks of a memory-bound kernel are scheduled as SMs free
//   up and a partial last wave still has the whole bandwidth. Quantization
//   stays on the compute-bound share (1-g), where a wave's time is set by
//   the SMs. For large grids both reduce to Eq. 2's asymptotics.
// - A host-timed origin on its floor hides its work. Then the work is
//   estimated from its DRAM bytes (and FLOPs) at the origin's achieved
//   rates, and the floor carries over scaled by the GPUs' floor ratio
//   (floors of one operator on two hosts are close to proportional).
absl::StatusOr<KernelPrediction> ScaleKernel(const Kernel& kernel, const DeviceSpec& origin,
                                             const DeviceSpec& target,
                                             const ScalingOptions& options) {
  HABITAT_RETURN_IF_ERROR(CheckKernel(kernel));
  HABITAT_RETURN_IF_ERROR(CheckDevice(origin, "origin"));
  HABITAT_RETURN_IF_ERROR(CheckDevice(target, "target"));
  HABITAT_ASSIGN_OR_RETURN(const ScalingConstants co,
                           ResolveScalingConstants(origin, options.basis));
  HABITAT_ASSIGN_OR_RETURN(const ScalingConstants cd,
                           ResolveScalingConstants(target, options.basis));
  HABITAT_ASSIGN_OR_RETURN(double gamma, KernelGamma(kernel, target));
  HABITAT_ASSIGN_OR_RETURN(const Waves waves, CountWaves(kernel, origin, target));

  KernelPrediction p;
  p.origin_waves = waves.origin;
  p.target_waves = waves.target;
  p.branch = ScalingBranch::kWorkScaled;

  const double t_o = static_cast<double>(kernel.duration_ns());
  double work_o = std::max(t_o - static_cast<double>(co.fixed_ns), 0.0);
  double floor_d = static_cast<double>(cd.floor_ns);

  if (options.basis == TimeBasis::kHostTimedOp) {
    const double floor_o = static_cast<double>(co.floor_ns);
    const uint64_t bytes = DramBytes(kernel);
    bool on_floor = false;
    double roofline_work_o = 0;
    if (kernel.has_counters() && bytes > 0) {
      roofline_work_o = static_cast<double>(bytes) / (co.streaming_bandwidth_gbps * 1e9) * 1e9;
      const double peak = PeakFlops(kernel, origin);
      if (peak > 0) {
        roofline_work_o =
            std::max(roofline_work_o, static_cast<double>(Flops(kernel)) / peak * 1e9);
      }
      on_floor = work_o > kFloorWorkMargin * roofline_work_o && t_o < kFloorBand * floor_o;
    } else {
      on_floor = t_o <= kFloorBandWithoutCounters * floor_o;
    }
    if (on_floor) {
      // Without counters the hidden work is unknown; it is below the
      // floor, so the floor is the best guess for the target too.
      work_o = roofline_work_o;
      floor_d = t_o * static_cast<double>(cd.floor_ns) / floor_o;
      p.branch = ScalingBranch::kWorkFromCounters;
    }
  }

  // With measured DRAM bytes, the memory-bound share of the work is the
  // share that streaming those bytes at the origin's achieved bandwidth
  // takes. A kernel that moves little data for its time (batch norm on small
  // tensors, pooling, latency-bound kernels) is not sped up by a faster
  // memory, whatever its FLOP intensity (see docs/kernel_alike_accuracy.md).
  const uint64_t known_bytes =
      kernel.has_counters() ? DramBytes(kernel) : options.estimated_dram_bytes.value_or(0);
  if (options.gamma_from_achieved_bandwidth && p.branch == ScalingBranch::kWorkScaled &&
      known_bytes > 0 && work_o > 0) {
    const double streaming_ns = static_cast<double>(known_bytes) / co.streaming_bandwidth_gbps;
    gamma = std::min(1.0, streaming_ns / work_o);
  }
  if (options.gamma_override.has_value()) {
    gamma = std::clamp(*options.gamma_override, 0.0, 1.0);
  }
  p.gamma = gamma;

  const double memory = co.streaming_bandwidth_gbps / cd.streaming_bandwidth_gbps;
  const double compute = static_cast<double>(waves.target) / static_cast<double>(waves.origin) *
                         co.clock_mhz / cd.clock_mhz;
  const double work_d = work_o * std::pow(memory, gamma) * std::pow(compute, 1.0 - gamma);
  double t_d = static_cast<double>(cd.fixed_ns) + work_d;
  if (floor_d > t_d) {
    t_d = floor_d;
    p.branch = ScalingBranch::kTargetFloor;
  }
  p.predicted_ns = std::llround(t_d);
  return p;
}

}  // namespace habitat
