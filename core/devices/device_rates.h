// What a GPU can do, read from its DeviceSpec: the peak and the sustained
// matmul throughput of each math mode, the mode it runs a pass in, the
// bandwidth a streaming kernel reaches and the SM clock it holds under
// load. The one owner of these rates for the scaling rules (core/scaling)
// and the kernel-varying model's features (core/kernel_varying), whose Python twin is
// models/habitat_models/features.py: change both or neither. Where the
// figures come from: docs/gpu_efficiency_sources.md.
#pragma once

#include "core/trace/math_mode.h"
#include "habitat/v1/device.pb.h"

namespace habitat {

// Where a GPU has no measured sustained matmul throughput for a mode: this
// fraction of the datasheet peak (DEFAULT_SUSTAINED_FRACTION in
// features.py; the median of the measured fractions in
// docs/gpu_efficiency_sources.md).
inline constexpr double kDefaultSustainedFraction = 0.75;

// Where a GPU has no measured streaming bandwidth: this fraction of the
// datasheet bandwidth (DEFAULT_STREAMING_FRACTION in features.py; the mean
// of the five GPUs fitted on NeuSight data, docs/kernel_alike_accuracy.md).
inline constexpr double kDefaultStreamingEfficiency = 0.82;

// Datasheet peak TFLOP/s of the mode's units; 0 where the GPU has none.
double PeakTflops(const v1::DeviceSpec& device, MathMode mode);

// The spec entry's measured dense matmul TFLOP/s in the mode
// (measured_*_gemm_tflops); 0 where none was measured.
double MeasuredGemmTflops(const v1::DeviceSpec& device, MathMode mode);

// Dense matmul TFLOP/s the GPU sustains in the mode: MeasuredGemmTflops
// where there is one, else kDefaultSustainedFraction of the peak (so 0
// without such units).
double SustainedTflops(const v1::DeviceSpec& device, MathMode mode);

// DRAM bandwidth a streaming kernel reaches (GB/s): the measured
// streaming_bandwidth_gbps, else the measured device-to-device copy
// bandwidth, else kDefaultStreamingEfficiency of the datasheet bandwidth.
double StreamingBandwidthGbps(const v1::DeviceSpec& device);

// True where StreamingBandwidthGbps is not a measured streaming figure.
bool StreamingBandwidthIsDefault(const v1::DeviceSpec& device);

// The SM clock a GPU holds under load (MHz): sustained_clock_mhz where the
// database has a measured one, else the boost clock.
double SustainedClockMhz(const v1::DeviceSpec& device);

// The math mode a target GPU runs a pass in that ran in `origin_mode`
// (target_mode() in features.py): fp32 where the GPU has no units of that
// mode (no TF32 before Ampere, no bf16 tensor cores on V100 or T4, no fp16
// tensor cores on Pascal), else the same mode.
MathMode TargetMathMode(MathMode origin_mode, const v1::DeviceSpec& target);

}  // namespace habitat
