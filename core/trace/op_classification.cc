#include "core/trace/op_classification.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace habitat {
namespace {

// Matched against the name without its "aten::" prefix.
constexpr absl::string_view kVaryingForward[] = {"conv1d",
                                                 "conv2d",
                                                 "conv3d",
                                                 "convolution",
                                                 "_convolution",
                                                 "cudnn_convolution",
                                                 "conv_transpose1d",
                                                 "conv_transpose2d",
                                                 "conv_transpose3d",
                                                 "cudnn_convolution_transpose",
                                                 "linear",
                                                 "addmm",
                                                 "mm",
                                                 "matmul",
                                                 "bmm",
                                                 "baddbmm",
                                                 "addbmm",
                                                 "einsum",
                                                 "lstm",
                                                 "gru",
                                                 "rnn_tanh",
                                                 "rnn_relu",
                                                 "_cudnn_rnn",
                                                 "scaled_dot_product_attention",
                                                 "_scaled_dot_product_flash_attention",
                                                 "_scaled_dot_product_efficient_attention",
                                                 "_scaled_dot_product_cudnn_attention",
                                                 "_flash_attention_forward",
                                                 "_efficient_attention_forward",
                                                 "multi_head_attention_forward",
                                                 "_native_multi_head_attention",
                                                 "_transformer_encoder_layer_fwd"};

// Autograd node names (prefix match, "Backward0" etc. follow).
constexpr absl::string_view kVaryingBackward[] = {"ConvolutionBackward",
                                                  "CudnnConvolutionBackward",
                                                  "AddmmBackward",
                                                  "MmBackward",
                                                  "BmmBackward",
                                                  "BaddbmmBackward",
                                                  "AddbmmBackward",
                                                  "CudnnRnnBackward",
                                                  "ScaledDotProduct",
                                                  "FlashAttentionBackward",
                                                  "EfficientAttentionBackward",
                                                  "LinearBackward"};

}  // namespace

OpKind ClassifyOperation(absl::string_view name) {
  absl::string_view bare = name;
  if (absl::ConsumePrefix(&bare, "aten::")) {
    for (absl::string_view varying : kVaryingForward) {
      if (bare == varying) return OpKind::kKernelVarying;
    }
    return OpKind::kKernelAlike;
  }
  absl::ConsumePrefix(&bare, "autograd::engine::evaluate_function: ");
  for (absl::string_view varying : kVaryingBackward) {
    if (absl::StartsWith(bare, varying)) return OpKind::kKernelVarying;
  }
  return OpKind::kKernelAlike;
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
