// Prints, as one JSON object on stdout, the device attributes that the wave
// scaling model needs (read with cudaDeviceGetAttribute, so nothing is taken
// from a datasheet) and a measured device-to-device copy bandwidth.
//
// The bandwidth counts bytes read plus bytes written (2 x copy size), the
// convention Habitat's memory-bound scaling uses; it is the median of 20
// timed cudaMemcpyAsync calls after 3 warm-ups, timed with CUDA events.
//
// Build and run: see README.md beside this file.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check_cuda.h"

namespace {

struct Attr {
  const char* name;
  cudaDeviceAttr attr;
};

const Attr kAttrs[] = {
    {"compute_capability_major", cudaDevAttrComputeCapabilityMajor},
    {"compute_capability_minor", cudaDevAttrComputeCapabilityMinor},
    {"multi_processor_count", cudaDevAttrMultiProcessorCount},
    {"clock_rate_khz", cudaDevAttrClockRate},
    {"memory_clock_rate_khz", cudaDevAttrMemoryClockRate},
    {"global_memory_bus_width_bits", cudaDevAttrGlobalMemoryBusWidth},
    {"l2_cache_size_bytes", cudaDevAttrL2CacheSize},
    {"max_persisting_l2_cache_size_bytes", cudaDevAttrMaxPersistingL2CacheSize},
    {"warp_size", cudaDevAttrWarpSize},
    {"max_threads_per_block", cudaDevAttrMaxThreadsPerBlock},
    {"max_threads_per_multiprocessor", cudaDevAttrMaxThreadsPerMultiProcessor},
    {"max_blocks_per_multiprocessor", cudaDevAttrMaxBlocksPerMultiprocessor},
    {"max_registers_per_block", cudaDevAttrMaxRegistersPerBlock},
    {"max_registers_per_multiprocessor", cudaDevAttrMaxRegistersPerMultiprocessor},
    {"max_shared_memory_per_block_bytes", cudaDevAttrMaxSharedMemoryPerBlock},
    {"max_shared_memory_per_block_optin_bytes", cudaDevAttrMaxSharedMemoryPerBlockOptin},
    {"max_shared_memory_per_multiprocessor_bytes", cudaDevAttrMaxSharedMemoryPerMultiprocessor},
    {"reserved_shared_memory_per_block_bytes", cudaDevAttrReservedSharedMemoryPerBlock},
    {"total_constant_memory_bytes", cudaDevAttrTotalConstantMemory},
    {"async_engine_count", cudaDevAttrAsyncEngineCount},
    {"concurrent_kernels", cudaDevAttrConcurrentKernels},
    {"ecc_enabled", cudaDevAttrEccEnabled},
    {"pci_bus_id", cudaDevAttrPciBusId},
    {"pci_device_id", cudaDevAttrPciDeviceId},
    {"single_to_double_precision_perf_ratio", cudaDevAttrSingleToDoublePrecisionPerfRatio},
    {"cooperative_launch", cudaDevAttrCooperativeLaunch},
    {"cluster_launch", cudaDevAttrClusterLaunch},
};

}  // namespace

int main() {
  int device = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  int runtime_version = 0;
  int driver_version = 0;
  CHECK_CUDA(cudaRuntimeGetVersion(&runtime_version));
  CHECK_CUDA(cudaDriverGetVersion(&driver_version));

  std::printf("{\n  \"name\": \"%s\",\n", prop.name);
  std::printf("  \"total_global_memory_bytes\": %zu,\n", prop.totalGlobalMem);
  std::printf("  \"cuda_runtime_version\": %d,\n", runtime_version);
  std::printf("  \"cuda_driver_version\": %d,\n", driver_version);
  std::printf("  \"attributes\": {\n");
  const int n = static_cast<int>(sizeof(kAttrs) / sizeof(kAttrs[0]));
  for (int i = 0; i < n; ++i) {
    int value = 0;
    cudaError_t err = cudaDeviceGetAttribute(&value, kAttrs[i].attr, device);
    if (err != cudaSuccess) {
      // Report the failure in place rather than invent a number.
      std::printf("    \"%s\": null%s\n", kAttrs[i].name, i + 1 < n ? "," : "");
      std::fprintf(stderr, "cudaDeviceGetAttribute(%s): %s\n", kAttrs[i].name,
                   cudaGetErrorString(err));
      cudaGetLastError();
      continue;
    }
    std::printf("    \"%s\": %d%s\n", kAttrs[i].name, value, i + 1 < n ? "," : "");
  }
  std::printf("  },\n");

  // 1 GiB each way: far larger than L2, long enough (~0.5 ms) for event timing.
  const size_t bytes = size_t{1} << 30;
  void* src = nullptr;
  void* dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, bytes));
  CHECK_CUDA(cudaMalloc(&dst, bytes));
  CHECK_CUDA(cudaMemset(src, 0x5a, bytes));
  CHECK_CUDA(cudaMemset(dst, 0x00, bytes));
  cudaEvent_t start;
  cudaEvent_t stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) {
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  const int kReps = 20;
  std::vector<double> ns;
  for (int i = 0; i < kReps; ++i) {
    CHECK_CUDA(cudaEventRecord(start));
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0.f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    ns.push_back(static_cast<double>(ms) * 1e6);
  }
  // Spot-check that the copy really happened.
  unsigned char probe = 0;
  CHECK_CUDA(cudaMemcpy(&probe, static_cast<char*>(dst) + bytes - 1, 1, cudaMemcpyDeviceToHost));
  std::sort(ns.begin(), ns.end());
  const double median_ns = (ns[kReps / 2 - 1] + ns[kReps / 2]) / 2.0;
  const double moved = 2.0 * static_cast<double>(bytes);
  std::printf("  \"d2d_copy\": {\n");
  std::printf("    \"copy_bytes\": %zu,\n", bytes);
  std::printf("    \"bytes_counted_per_copy\": %.0f,\n", moved);
  std::printf("    \"repetitions\": %d,\n", kReps);
  std::printf("    \"median_ns\": %.0f,\n", median_ns);
  std::printf("    \"min_ns\": %.0f,\n", ns.front());
  std::printf("    \"max_ns\": %.0f,\n", ns.back());
  std::printf("    \"bandwidth_bytes_per_s\": %.0f,\n", moved / median_ns * 1e9);
  std::printf("    \"copy_verified\": %s\n", probe == 0x5a ? "true" : "false");
  std::printf("  }\n}\n");
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(dst));
  return probe == 0x5a ? 0 : 1;
}
