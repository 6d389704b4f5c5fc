// The names of the kernel-varying operations (cuDNN/cuBLAS choose their
// kernels per GPU and per shape). Header-only standard C++17, because the
// agent's PyTorch extension compiles it too: the agent re-runs these
// operations at other batch sizes, which the engine then reads.
#pragma once

#include <string_view>

namespace habitat {
namespace op_names {

// ATen names without their "aten::" prefix.
inline constexpr std::string_view kVaryingForward[] = {"conv1d",
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
inline constexpr std::string_view kVaryingBackward[] = {"ConvolutionBackward",
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

// Whether an ATen name ("aten::conv2d") or an autograd node name
// ("ConvolutionBackward0", possibly after "autograd::engine::evaluate_function: ")
// is a kernel-varying operation's.
inline bool IsKernelVaryingName(std::string_view name) {
  constexpr std::string_view kAten = "aten::";
  if (name.substr(0, kAten.size()) == kAten) {
    name.remove_prefix(kAten.size());
    for (std::string_view varying : kVaryingForward) {
      if (name == varying) return true;
    }
    return false;
  }
  constexpr std::string_view kNode = "autograd::engine::evaluate_function: ";
  if (name.substr(0, kNode.size()) == kNode) name.remove_prefix(kNode.size());
  for (std::string_view varying : kVaryingBackward) {
    if (name.substr(0, varying.size()) == varying) return true;
  }
  return false;
}

}  // namespace op_names
}  // namespace habitat
