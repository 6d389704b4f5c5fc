// Which operations wave scaling can carry across GPUs and which run
// different kernels per architecture (cuDNN/cuBLAS choose per GPU), so need a
// learned predictor (paper §3.4).
#pragma once

#include "absl/strings/string_view.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

enum class OpKind {
  kKernelAlike,
  kKernelVarying,
};

// Classifies by ATen name ("aten::conv2d") or autograd node name
// ("ConvolutionBackward0").
OpKind ClassifyOperation(absl::string_view name);

// Whether `op` is kernel-varying by its ATen name or by the autograd node
// its backward pass was recorded under.
bool IsKernelVaryingOperation(const habitat::v1::Operation& op);

// Autograd adding a parameter's gradient into .grad; its argument is the
// parameter.
bool IsAccumulateGrad(const habitat::v1::Operation& op);

// The optimizer's step: torch's foreach kernels and "Optimizer." ranges.
bool IsOptimizerStep(const habitat::v1::Operation& op);

// A kernel a kernel-varying operation launches around its GEMM or
// convolution that does no arithmetic of its own: cuDNN's layout transforms
// (NCHW <-> NHWC for tensor cores, padding, slicing) and ATen's elementwise,
// copy and reduction kernels (bias add, autocast casts, contiguous copies,
// bias gradient). They stream memory on every GPU, whatever the GEMM does.
bool IsAuxiliaryKernel(absl::string_view kernel_name);

// The share of `pass`'s device time (kernels and memory activities) its
// auxiliary kernels take, in [0, 1]; 0 for a pass without device activity.
double AuxiliaryKernelShare(const habitat::v1::Pass& pass);

}  // namespace habitat
