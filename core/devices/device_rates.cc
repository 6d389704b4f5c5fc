#include "core/devices/device_rates.h"

namespace habitat {

using v1::DeviceSpec;

double PeakTflops(const DeviceSpec& device, MathMode mode) {
  switch (mode) {
    case MathMode::kFp32:
      return device.peak_fp32_tflops();
    case MathMode::kTf32:
      return device.peak_tf32_tflops();
    case MathMode::kFp16:
      return device.peak_fp16_tensor_tflops();
    case MathMode::kBf16:
      return device.peak_bf16_tensor_tflops();
  }
  return 0;
}

double MeasuredGemmTflops(const DeviceSpec& device, MathMode mode) {
  switch (mode) {
    case MathMode::kFp32:
      return device.measured_fp32_gemm_tflops();
    case MathMode::kTf32:
      return device.measured_tf32_gemm_tflops();
    case MathMode::kFp16:
      return device.measured_fp16_gemm_tflops();
    case MathMode::kBf16:
      return device.measured_bf16_gemm_tflops();
  }
  return 0;
}

double SustainedTflops(const DeviceSpec& device, MathMode mode) {
  const double measured = MeasuredGemmTflops(device, mode);
  return measured > 0 ? measured : kDefaultSustainedFraction * PeakTflops(device, mode);
}

double StreamingBandwidthGbps(const DeviceSpec& device) {
  if (device.streaming_bandwidth_gbps() > 0) return device.streaming_bandwidth_gbps();
  if (device.measured_memory_bandwidth_gbps() > 0) return device.measured_memory_bandwidth_gbps();
  return kDefaultStreamingEfficiency * device.memory_bandwidth_gbps();
}

bool StreamingBandwidthIsDefault(const DeviceSpec& device) {
  return !(device.streaming_bandwidth_gbps() > 0);
}

double SustainedClockMhz(const DeviceSpec& device) {
  return device.sustained_clock_mhz() > 0 ? device.sustained_clock_mhz() : device.boost_clock_mhz();
}

MathMode TargetMathMode(MathMode origin_mode, const DeviceSpec& target) {
  if (origin_mode != MathMode::kFp32 && PeakTflops(target, origin_mode) <= 0) {
    return MathMode::kFp32;
  }
  return origin_mode;
}

}  // namespace habitat
