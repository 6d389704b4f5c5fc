// Reads an operation's recorded arguments (Kineto importer or agent: named
// "0", "1", ... by position, TensorList elements "i.j") into the
// configuration the kernel-varying predictor takes.
//
// Handled forward ops: aten::linear, addmm, mm, matmul, bmm, baddbmm,
// conv2d, convolution (2-D), conv_transpose2d, lstm,
// scaled_dot_product_attention. Within those, only the variants the
// predictor was trained on have a signature: square kernels, strides and
// paddings, square inputs, groups 1, dilation 1, no output padding,
// self-attention without a mask, LSTMs without projections, and
// float/bf16/fp16 tensors. The math mode the op ran in is not part of the
// signature: core/trace/math_mode.h infers it.
#pragma once

#include <optional>

#include "absl/status/statusor.h"
#include "core/kernel_varying/op_config.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {
namespace kernel_varying {

struct OpSignature {
  Family family = Family::kLinear;
  OpConfig config{};  // unused columns 0
  // Independent passes of `config` the op runs per call (2 for a
  // bidirectional LSTM: one per direction). The caller divides the origin
  // time by it for the features and multiplies the prediction back.
  int direction_factor = 1;
};

// nullopt: not a signature the predictor covers (another op, a variant
// outside training, or a trace recorded without shapes). INVALID_ARGUMENT,
// naming the op and argument, when a handled op's arguments contradict its
// ATen schema (PyTorch would have refused to run it, so the trace is
// damaged).
absl::StatusOr<std::optional<OpSignature>> ExtractOpSignature(const habitat::v1::Operation& op);

}  // namespace kernel_varying
}  // namespace habitat
