#include "core/trace/op_classification.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/match.h"
#include "core/trace/op_names.h"

namespace habitat {

OpKind ClassifyOperation(absl::string_view name) {
  return op_names::IsKernelVaryingName(std::string_view(name.data(), name.size()))
             ? OpKind::kKernelVarying
             : OpKind::kKernelAlike;
}

bool IsKernelVaryingOperation(const v1::Operation& op) {
  return ClassifyOperation(op.name()) == OpKind::kKernelVarying ||
         (op.has_backward() &&
          ClassifyOperation(op.backward().recorded_name()) == OpKind::kKernelVarying);
}

bool IsAccumulateGrad(const habitat::v1::Operation& op) {
  return absl::StrContains(op.name(), "AccumulateGrad");
}

bool IsOptimizerStep(const habitat::v1::Operation& op) {
  return absl::StrContains(op.name(), "Optimizer.") ||
         absl::StartsWith(op.name(), "aten::_foreach");
}

bool IsAuxiliaryKernel(absl::string_view kernel_name) {
  // Names as CUPTI reports them; "at::native::" alone would also take
  // ATen's depthwise convolution kernels, which are the operation's work.
  static constexpr absl::string_view kPatterns[] = {"at::native::elementwise_kernel",
                                                    "at::native::vectorized_elementwise_kernel",
                                                    "at::native::unrolled_elementwise_kernel",
                                                    "at::native::reduce_kernel",
                                                    "nchwToNhwcKernel",
                                                    "nhwcToNchwKernel",
                                                    "nhwcSliceCKernel",
                                                    "nhwcAddPaddingKernel",
                                                    "tensorTransformGeneric"};
  for (absl::string_view pattern : kPatterns) {
    if (absl::StrContains(kernel_name, pattern)) return true;
  }
  return false;
}

double AuxiliaryKernelShare(const habitat::v1::Pass& pass) {
  double auxiliary = 0;
  double device = 0;
  for (const auto& kernel : pass.kernels()) {
    const double ns = static_cast<double>(std::max<int64_t>(kernel.duration_ns(), 0));
    device += ns;
    if (IsAuxiliaryKernel(kernel.name())) auxiliary += ns;
  }
  for (const auto& memory : pass.memory()) {
    device += static_cast<double>(std::max<int64_t>(memory.duration_ns(), 0));
  }
  return device > 0 ? auxiliary / device : 0.0;
}

}  // namespace habitat
