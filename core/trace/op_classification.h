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

}  // namespace habitat
