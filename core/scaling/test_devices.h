// Datasheet specs of the GPUs the scaling tests use, built in code so each
// test's arithmetic can be checked by hand against the numbers here.
// Sources: NVIDIA V100 and A100 datasheets / whitepapers, CUDA C++
// Programming Guide "Technical Specifications per Compute Capability",
// H100: values the driver reports (sharedMemPerMultiprocessor 228 KiB,
// sharedMemPerBlockOptin 227 KiB, 1 KiB reserved per block).
#pragma once

#include "habitat/v1/device.pb.h"

namespace habitat::testing {

inline void SetCommonLimits(habitat::v1::DeviceSpec& d) {
  d.set_max_threads_per_sm(2048);
  d.set_max_blocks_per_sm(32);
  d.set_registers_per_sm(65536);
  d.set_max_registers_per_block(65536);
  d.set_max_registers_per_thread(255);
  d.set_register_allocation_unit(256);
  d.set_max_threads_per_block(1024);
  d.set_warp_size(32);
  d.set_max_warps_per_sm(64);
}

inline habitat::v1::DeviceSpec V100() {
  habitat::v1::DeviceSpec d;
  d.set_id("V100-PCIE-32GB");
  d.set_compute_capability_major(7);
  d.set_compute_capability_minor(0);
  SetCommonLimits(d);
  d.set_sm_count(80);
  d.set_shared_memory_per_sm_bytes(98304);
  d.set_max_shared_memory_per_block_bytes(98304);
  d.set_shared_memory_allocation_unit_bytes(256);
  d.set_reserved_shared_memory_per_block_bytes(0);
  d.set_boost_clock_mhz(1380);
  d.set_memory_bandwidth_gbps(900);
  d.set_peak_fp32_tflops(14.0);
  return d;
}

inline habitat::v1::DeviceSpec A100() {
  habitat::v1::DeviceSpec d;
  d.set_id("A100-PCIE-40GB");
  d.set_compute_capability_major(8);
  d.set_compute_capability_minor(0);
  SetCommonLimits(d);
  d.set_sm_count(108);
  d.set_shared_memory_per_sm_bytes(167936);
  d.set_max_shared_memory_per_block_bytes(166912);
  d.set_shared_memory_allocation_unit_bytes(128);
  d.set_reserved_shared_memory_per_block_bytes(1024);
  d.set_boost_clock_mhz(1410);
  d.set_memory_bandwidth_gbps(1555);
  d.set_peak_fp32_tflops(19.5);
  d.set_peak_fp16_tensor_tflops(312);
  return d;
}

inline habitat::v1::DeviceSpec H100() {
  habitat::v1::DeviceSpec d;
  d.set_id("H100-SXM");
  d.set_compute_capability_major(9);
  d.set_compute_capability_minor(0);
  SetCommonLimits(d);
  d.set_sm_count(132);
  d.set_shared_memory_per_sm_bytes(233472);
  d.set_max_shared_memory_per_block_bytes(232448);
  d.set_shared_memory_allocation_unit_bytes(128);
  d.set_reserved_shared_memory_per_block_bytes(1024);
  d.set_boost_clock_mhz(1980);
  d.set_memory_bandwidth_gbps(3350);
  d.set_peak_fp32_tflops(67);
  return d;
}

// Tesla P100 (compute capability 6.0): the one architecture whose register
// file is split into two partitions instead of four.
inline habitat::v1::DeviceSpec P100() {
  habitat::v1::DeviceSpec d;
  d.set_id("P100");
  d.set_compute_capability_major(6);
  d.set_compute_capability_minor(0);
  SetCommonLimits(d);
  d.set_sm_count(56);
  d.set_shared_memory_per_sm_bytes(65536);
  d.set_max_shared_memory_per_block_bytes(49152);
  d.set_shared_memory_allocation_unit_bytes(256);
  d.set_boost_clock_mhz(1329);
  d.set_memory_bandwidth_gbps(732);
  d.set_peak_fp32_tflops(9.3);
  return d;
}

}  // namespace habitat::testing
