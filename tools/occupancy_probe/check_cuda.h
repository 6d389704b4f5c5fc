// CHECK_CUDA(expr): the probes' one way to stop on a CUDA error, naming the
// call, its place and CUDA's message.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(expr)                                                        \
  do {                                                                          \
    cudaError_t err_ = (expr);                                                  \
    if (err_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, \
                   cudaGetErrorString(err_));                                   \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)
