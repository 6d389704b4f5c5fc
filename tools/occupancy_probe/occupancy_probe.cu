// Reference occupancy table from the CUDA runtime itself.
//
// For a set of kernels that differ in registers per thread and static shared
// memory, asks cudaOccupancyMaxActiveBlocksPerMultiprocessor for every
// (block size, dynamic shared memory) pair in a fixed grid and writes
//   kernel,regs_per_thread,static_smem_bytes,block_size,dynamic_smem_bytes,
//   max_active_blocks_per_sm
// as CSV. The rows are ground truth for our own occupancy model (the one wave
// scaling needs), so the kernels are never launched: only their resource usage
// matters, and that is read back with cudaFuncGetAttributes rather than assumed.
//
// Build and run: see README.md beside this file.

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check_cuda.h"

namespace {

// Keeps kAcc values live across a data-dependent loop so the register demand
// grows with kAcc; the optional static shared tile is written and read back so
// the compiler cannot drop it.
template <int kAcc, int kStaticSmemBytes>
__device__ __forceinline__ void Body(const float* __restrict__ in, float* __restrict__ out,
                                     int iters) {
  float acc[kAcc];
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = in[tid + i * 97];
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      acc[i] = fmaf(acc[i], acc[(i + 1) % kAcc], acc[(i + 7) % kAcc]);
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kAcc; ++i) sum += acc[i] * static_cast<float>(i + 1);
  if constexpr (kStaticSmemBytes > 0) {
    constexpr int kFloats = kStaticSmemBytes / 4;
    __shared__ float tile[kFloats];
    for (int i = threadIdx.x; i < kFloats; i += blockDim.x) tile[i] = sum + i;
    __syncthreads();
    sum += tile[(threadIdx.x * 31 + iters) % kFloats];
  }
  out[tid] = sum;
}

// A kernel with almost no register demand: the low end of the register axis.
__global__ void tiny(const float* __restrict__ in, float* __restrict__ out, int iters) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  out[tid] = in[tid] * static_cast<float>(iters);
}

#define NATURAL_KERNEL(NAME, ACC, SMEM)                                                    \
  __global__ void NAME(const float* __restrict__ in, float* __restrict__ out, int iters) { \
    Body<ACC, SMEM>(in, out, iters);                                                       \
  }

// __maxnreg__ (CUDA 12.4+) caps registers per kernel, which gives exact
// register counts between the natural ones (spilling to local memory).
#define CAPPED_KERNEL(NAME, ACC, SMEM, CAP)                                    \
  __global__ void __maxnreg__(CAP)                                             \
      NAME(const float* __restrict__ in, float* __restrict__ out, int iters) { \
    Body<ACC, SMEM>(in, out, iters);                                           \
  }

NATURAL_KERNEL(acc16, 16, 0)
NATURAL_KERNEL(acc32, 32, 0)
NATURAL_KERNEL(acc48, 48, 0)
NATURAL_KERNEL(acc64, 64, 0)
NATURAL_KERNEL(acc96, 96, 0)
NATURAL_KERNEL(acc128, 128, 0)
NATURAL_KERNEL(acc192, 192, 0)
CAPPED_KERNEL(acc128_cap40, 128, 0, 40)
CAPPED_KERNEL(acc128_cap56, 128, 0, 56)
CAPPED_KERNEL(acc128_cap80, 128, 0, 80)
CAPPED_KERNEL(acc192_cap168, 192, 0, 168)
NATURAL_KERNEL(acc16_smem2k, 16, 2048)
NATURAL_KERNEL(acc32_smem12k, 32, 12288)
NATURAL_KERNEL(acc64_smem20k, 64, 20480)
NATURAL_KERNEL(acc32_smem40k, 32, 40960)
CAPPED_KERNEL(acc128_cap72_smem8k, 128, 8192, 72)

using KernelFn = void (*)(const float*, float*, int);

struct Kernel {
  const char* name;
  KernelFn fn;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT.csv\n", argv[0]);
    return 2;
  }
  const std::vector<Kernel> kernels = {
      {"tiny", tiny},
      {"acc16", acc16},
      {"acc32", acc32},
      {"acc48", acc48},
      {"acc64", acc64},
      {"acc96", acc96},
      {"acc128", acc128},
      {"acc192", acc192},
      {"acc128_cap40", acc128_cap40},
      {"acc128_cap56", acc128_cap56},
      {"acc128_cap80", acc128_cap80},
      {"acc192_cap168", acc192_cap168},
      {"acc16_smem2k", acc16_smem2k},
      {"acc32_smem12k", acc32_smem12k},
      {"acc64_smem20k", acc64_smem20k},
      {"acc32_smem40k", acc32_smem40k},
      {"acc128_cap72_smem8k", acc128_cap72_smem8k},
  };
  const int block_sizes[] = {32, 64, 96, 128, 192, 256, 384, 512, 640, 768, 1024};
  const int dynamic_smem[] = {0, 1024, 4096, 16384, 32768, 49152, 65536, 100000, 150000, 200000};
  int device = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  int optin = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  std::printf("device %s, shared memory opt-in limit per block %d bytes\n", prop.name, optin);

  FILE* csv = std::fopen(argv[1], "w");
  if (csv == nullptr) {
    std::fprintf(stderr, "cannot open %s for writing\n", argv[1]);
    return 1;
  }
  std::fprintf(csv,
               "kernel,regs_per_thread,static_smem_bytes,block_size,"
               "dynamic_smem_bytes,max_active_blocks_per_sm\n");
  int rows = 0;
  int skipped = 0;
  for (const Kernel& k : kernels) {
    cudaFuncAttributes attr{};
    CHECK_CUDA(cudaFuncGetAttributes(&attr, k.fn));
    std::printf(
        "%-22s regs %3d static_smem %6zu local %5zu max_threads_per_block "
        "%4d\n",
        k.name, attr.numRegs, attr.sharedSizeBytes, attr.localSizeBytes, attr.maxThreadsPerBlock);
    for (int dyn : dynamic_smem) {
      if (static_cast<long>(attr.sharedSizeBytes) + dyn > optin) {
        ++skipped;
        continue;
      }
      // Set the kernel's dynamic limit to exactly this row's amount: beyond
      // 48 KiB of static + dynamic a launch needs the opt-in, and without it
      // the calculator answers 0 blocks, which says nothing about occupancy.
      {
        cudaError_t err =
            cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn);
        if (err != cudaSuccess) {
          std::printf("  skip dyn %d: cudaFuncSetAttribute: %s\n", dyn, cudaGetErrorString(err));
          cudaGetLastError();  // Clear so later calls are not blamed.
          ++skipped;
          continue;
        }
      }
      for (int bs : block_sizes) {
        int blocks = -1;
        cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.fn, bs, dyn);
        if (err != cudaSuccess) {
          std::printf("  skip block %d dyn %d: %s\n", bs, dyn, cudaGetErrorString(err));
          cudaGetLastError();
          ++skipped;
          continue;
        }
        std::fprintf(csv, "%s,%d,%zu,%d,%d,%d\n", k.name, attr.numRegs, attr.sharedSizeBytes, bs,
                     dyn, blocks);
        ++rows;
      }
    }
  }
  if (std::fclose(csv) != 0) {
    std::fprintf(stderr, "error closing %s\n", argv[1]);
    return 1;
  }
  std::printf("wrote %d rows (%d combinations skipped) to %s\n", rows, skipped, argv[1]);
  return 0;
}
