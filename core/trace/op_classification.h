// Which operations wave scaling can carry across GPUs and which run
// different kernels per architecture (cuDNN/cuBLAS choose per GPU), so need a
// learned predictor (paper §3.4).
#pragma once

#include "absl/strings/string_view.h"

namespace habitat {

enum class OpKind {
  kKernelAlike,
  kKernelVarying,
};

// Classifies by ATen name ("aten::conv2d") or autograd node name
// ("ConvolutionBackward0").
OpKind ClassifyOperation(absl::string_view name);

}  // namespace habitat
