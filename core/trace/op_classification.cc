#include "core/trace/op_classification.h"

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

}  // namespace habitat
