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
// float/bf16/fp16 tensors.
#pragma once

#include <optional>

#include "absl/status/statusor.h"
#include "core/mlp/op_config.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {
namespace mlp {

struct OpSignature {
  Family family = Family::kLinear;
  OpConfig config{};  // unused columns 0
  Precision precision = Precision::kFp32;
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
//
// Precision is bf16 if any tensor argument is c10::BFloat16 or c10::Half, or
// the trace ran in BF16/FP16 or under autocast (autocast casts inside the
// op: the recorded inputs of e.g. the first conv2d are still float); fp32
// otherwise, TF32 included.
absl::StatusOr<std::optional<OpSignature>> ExtractOpSignature(
    const habitat::v1::Operation& op, habitat::v1::Precision trace_precision);

}  // namespace mlp
}  // namespace habitat
