// Scales one kernel's measured time from the GPU it ran on (origin) to
// another GPU (target).
//
// PaperWaveScaling is Habitat's wave scaling exactly as published (Yu et al.,
// USENIX ATC'21, Eq. 2 with gamma from the roofline, Eq. 3), kept as the
// baseline. ScaleKernel is our model: it splits the time into a per-GPU
// fixed part and a work part, scales only the work, and for host-timed
// operator latencies knows the host-bound floor (see the .cc and
// docs/kernel_alike_accuracy.md for the rationale and the measured error).
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "core/devices/device_rates.h"
#include "habitat/v1/device.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// What a kernel's duration measures.
enum class TimeBasis {
  // The kernel's own GPU time, as CUPTI reports it (Habitat traces).
  kKernelDuration,
  // The latency of a framework operator timed from the host, back to back
  // (e.g. the NeuSight data set): includes dispatch, so tiny operators sit
  // on a host-bound floor instead of scaling with the GPU.
  kHostTimedOp,
};

struct ScalingOptions {
  TimeBasis basis = TimeBasis::kKernelDuration;
  // With DRAM bytes counted, take gamma from the achieved bandwidth (the
  // share of the work that streaming the bytes takes) instead of Eq. 3's
  // arithmetic intensity. Off only to compare the two.
  bool gamma_from_achieved_bandwidth = true;
  // The caller knows the memory-bound share better than the counters (e.g. 0
  // for a GEMM run on GPUs of identical compute units); in [0, 1].
  std::optional<double> gamma_override;
  // DRAM bytes of a kernel without counters, estimated by the caller (e.g.
  // from the operation's tensor sizes); used like counted bytes for gamma
  // from the achieved bandwidth. Ignored when the kernel has counters.
  std::optional<uint64_t> estimated_dram_bytes;
};

enum class ScalingBranch {
  // PaperWaveScaling: Eq. 2.
  kPaperEq2,
  // Fixed part swapped, measured work scaled.
  kWorkScaled,
  // The origin time was on its host-bound floor, so it says nothing about
  // the work; the work was estimated from the kernel's DRAM bytes (and
  // FLOPs) at the origin's streaming bandwidth, then scaled.
  kWorkFromCounters,
  // The target's floor exceeds the scaled work: the prediction is the floor.
  kTargetFloor,
};
const char* ScalingBranchName(ScalingBranch branch);

struct KernelPrediction {
  int64_t predicted_ns = 0;
  double gamma = 1.0;
  int64_t origin_waves = 0;
  int64_t target_waves = 0;
  ScalingBranch branch = ScalingBranch::kPaperEq2;
};

// The per-GPU constants ScaleKernel uses for one time basis, with the
// documented defaults filled in where the DeviceSpec has no measured value.
struct ScalingConstants {
  double streaming_bandwidth_gbps = 0;
  bool streaming_bandwidth_is_default = false;
  int64_t fixed_ns = 0;
  bool fixed_is_default = false;
  // 0 for TimeBasis::kKernelDuration (a kernel's GPU time has no host floor).
  int64_t floor_ns = 0;
  bool floor_is_default = false;
  // The SM clock under load: sustained_clock_mhz, else the boost clock.
  double clock_mhz = 0;
};

// Defaults for GPUs without measured constants (the streaming bandwidth's
// is in core/devices/device_rates.h).
// Host-timed operator constants: the medians of the five fitted GPUs
// (fixed 15.0-29.5 us, floor 30.4-46.7 us). They describe NeuSight's hosts
// (PyTorch 2.1 eager), the only host data we have; another host or
// framework has other values.
inline constexpr int64_t kDefaultOpFixedLatencyNs = 19'600;
inline constexpr int64_t kDefaultOpLatencyFloorNs = 31'000;
// Kernel-duration fixed part: the mean of the two GPUs measured (H100 SXM
// 1459 ns, H200 1234 ns). A default of 0 would be wrong whenever the other
// GPU of a pair is measured: a 1.5 us kernel would be predicted at ~0.
inline constexpr int64_t kDefaultKernelFixedLatencyNs = 1'350;

absl::StatusOr<ScalingConstants> ResolveScalingConstants(const habitat::v1::DeviceSpec& device,
                                                         TimeBasis basis);

// Eq. 3 of the paper: the share of a kernel's time that scales with memory
// bandwidth, from its arithmetic intensity x (FLOP per DRAM byte) and the
// GPU's ridge point R (peak FLOP/s over bandwidth): 1 - 0.5 x/R for x <= R,
// 0.5 R/x above. Both must be positive.
double RooflineGamma(double intensity, double ridge_point);

// gamma for `kernel` on `device`: 1 without counters or without FLOPs, 0 with
// FLOPs but no DRAM bytes, else RooflineGamma with the device's ridge point
// (tensor-core peak if the kernel counted tensor FLOPs, else FP32 peak).
absl::StatusOr<double> KernelGamma(const habitat::v1::Kernel& kernel,
                                   const habitat::v1::DeviceSpec& device);

// Thread blocks in the grid, and blocks per wave (resident blocks per SM
// times SMs) on `device`. INVALID_ARGUMENT naming the field for an empty
// grid or block, or a launch `device` cannot run.
absl::StatusOr<int64_t> GridBlocks(const habitat::v1::Kernel& kernel);
absl::StatusOr<int64_t> WaveSize(const habitat::v1::Kernel& kernel,
                                 const habitat::v1::DeviceSpec& device);

// True when two GPUs differ at most in memory (size, bandwidth, L2): same
// architecture and compute capability, SM count, boost clock and peak FLOPS
// (within 0.5 %), e.g. H100 SXM and H200, or A100 40GB and 80GB. cuBLAS and
// cuDNN choose kernels by architecture and SM count, so such a pair runs the
// same kernels, and even kernel-varying operations can be wave-scaled.
bool SameComputeUnits(const habitat::v1::DeviceSpec& a, const habitat::v1::DeviceSpec& b);

// Eq. 2, unchanged from the paper:
//   T_d = ceil(B/W_d)/ceil(B/W_o) * (D_o W_d / (D_d W_o))^g * (C_o/C_d)^(1-g) * T_o
// with datasheet bandwidth D and boost clock C, g = KernelGamma on the target.
absl::StatusOr<KernelPrediction> PaperWaveScaling(const habitat::v1::Kernel& kernel,
                                                  const habitat::v1::DeviceSpec& origin,
                                                  const habitat::v1::DeviceSpec& target);

// Our model (see the .cc for the equations).
absl::StatusOr<KernelPrediction> ScaleKernel(const habitat::v1::Kernel& kernel,
                                             const habitat::v1::DeviceSpec& origin,
                                             const habitat::v1::DeviceSpec& target,
                                             const ScalingOptions& options = {});

}  // namespace habitat
