// Records cudaOccupancyMaxActiveBlocksPerMultiprocessor for kernels of
// several register and static shared memory sizes over block sizes and
// dynamic shared memory; output: h100_occupancy.csv (H100 80GB HBM3, driver
// 580.159.04, 2026-11-22). Build: nvcc -O2 -arch=sm_90 -o occ occupancy_probe.cu
#include <cuda_runtime.h>

#include <cstdio>

template <int N>
__global__ void regs_kernel(float* out, int iters) {
  float acc[N];
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = threadIdx.x * (i + 1);
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] = acc[i] * acc[(i + 1) % N] + 1.0f;
  }
  float s = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) s += acc[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int BYTES>
__global__ void smem_kernel(float* out) {
  __shared__ float buf[BYTES / 4];
  extern __shared__ float dyn[];
  buf[threadIdx.x % (BYTES / 4)] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = buf[(threadIdx.x + 1) % (BYTES / 4)] + dyn[0];
}

template <typename K>
void probe(const char* name, K kernel) {
  cudaFuncAttributes a;
  cudaFuncGetAttributes(&a, kernel);
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       232448 - (int)a.sharedSizeBytes);
  int blocks[] = {32, 64, 96, 128, 160, 192, 256, 384, 512, 640, 768, 1024};
  size_t dyn[] = {0, 1000, 4096, 20000, 38912, 49152, 65536, 100000, 150000};
  for (int b : blocks) {
    if (b > a.maxThreadsPerBlock) continue;
    for (size_t d : dyn) {
      if (d + a.sharedSizeBytes > 232448) continue;
      int n = -1;
      cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, b, d);
      printf("%s,%d,%zu,%d,%zu,%d,%s\n", name, a.numRegs, a.sharedSizeBytes, b, d,
             e == cudaSuccess ? n : -1, e == cudaSuccess ? "ok" : cudaGetErrorString(e));
    }
  }
}

int main() {
  printf(
      "kernel,regs_per_thread,static_smem_bytes,block_size,dynamic_smem_bytes,max_active_blocks_"
      "per_sm,status\n");
  probe("r4", regs_kernel<4>);
  probe("r16", regs_kernel<16>);
  probe("r24", regs_kernel<24>);
  probe("r32", regs_kernel<32>);
  probe("r48", regs_kernel<48>);
  probe("r64", regs_kernel<64>);
  probe("r96", regs_kernel<96>);
  probe("r128", regs_kernel<128>);
  probe("s1k", smem_kernel<1024>);
  probe("s10k", smem_kernel<10240>);
  probe("s40k", smem_kernel<40960>);
  return 0;
}
