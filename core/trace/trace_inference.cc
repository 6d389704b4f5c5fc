#include "core/trace/trace_inference.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/trace/math_mode.h"
#include "core/trace/op_classification.h"
#include "core/trace/trace_validation.h"

namespace habitat {
namespace {

// Which input of a layer holds one row per sample: embeddings take their
// indices second; the rest take the activations first. Layers whose input
// is 2-D only for the classifier head ([batch, features]) still count.
std::optional<int> SampleInput(absl::string_view name) {
  static constexpr absl::string_view kFirstInput[] = {"aten::conv1d",
                                                      "aten::conv2d",
                                                      "aten::conv3d",
                                                      "aten::conv_transpose1d",
                                                      "aten::conv_transpose2d",
                                                      "aten::conv_transpose3d",
                                                      "aten::linear",
                                                      "aten::batch_norm",
                                                      "aten::layer_norm",
                                                      "aten::group_norm",
                                                      "aten::instance_norm",
                                                      "aten::lstm",
                                                      "aten::gru",
                                                      "aten::rnn_tanh",
                                                      "aten::rnn_relu"};
  if (name == "aten::embedding") return 1;
  for (absl::string_view layer : kFirstInput) {
    if (name == layer) return 0;
  }
  return std::nullopt;
}

const v1::TensorArgument* Input(const v1::Operation& op, int index) {
  const std::string wanted = absl::StrCat(index);
  for (const auto& argument : op.arguments()) {
    if (argument.name() == wanted && argument.has_tensor()) return &argument.tensor();
  }
  return nullptr;
}

// The precision of a kernel-varying op's input, from the dtype as torch
// spells it (math_mode.h reads the spelling).
std::optional<v1::Precision> PrecisionOfDtype(absl::string_view dtype) {
  if (IsFloatDtype(dtype)) return v1::PRECISION_FP32;
  const std::optional<MathMode> half = HalfOfDtype(dtype);
  if (!half.has_value()) return std::nullopt;
  return *half == MathMode::kBf16 ? v1::PRECISION_BF16 : v1::PRECISION_FP16;
}

template <typename T>
std::pair<T, int> MostCommon(const std::map<T, int>& counts) {
  std::pair<T, int> best{};
  for (const auto& [value, count] : counts) {
    if (count > best.second) best = {value, count};
  }
  return best;
}

}  // namespace

std::optional<Inferred<uint32_t>> InferBatchSize(const v1::Trace& trace) {
  std::map<int64_t, int> leading;
  int layers = 0;
  for (const auto& op : trace.operations()) {
    const std::optional<int> index = SampleInput(op.name());
    if (!index.has_value()) continue;
    const v1::TensorArgument* input = Input(op, *index);
    if (input == nullptr || input->shape_size() < 2 || input->shape(0) <= 0) continue;
    ++layers;
    ++leading[input->shape(0)];
  }
  if (layers == 0) return std::nullopt;
  const auto [batch, agreeing] = MostCommon(leading);
  if (2 * agreeing <= layers || batch > kMaxBatchSize) return std::nullopt;
  return Inferred<uint32_t>{
      static_cast<uint32_t>(batch),
      absl::StrCat("the leading dimension of ", agreeing, " of ", layers,
                   " layer inputs (convolutions, linear layers, norms, embeddings, RNNs)")};
}

std::optional<Inferred<v1::Precision>> InferPrecision(const v1::Trace& trace) {
  if (trace.has_math() && trace.math().has_autocast_dtype()) {
    const std::string& dtype = trace.math().autocast_dtype();
    const std::string why =
        absl::StrCat("autocast to ", dtype, " (", trace.math().source(), " from the kernels)");
    if (dtype == "bf16") return Inferred<v1::Precision>{v1::PRECISION_AMP_BF16, why};
    if (dtype == "fp16") return Inferred<v1::Precision>{v1::PRECISION_AMP_FP16, why};
  }
  std::map<v1::Precision, int> dtypes;
  int inputs = 0;
  for (const auto& op : trace.operations()) {
    if (ClassifyOperation(op.name()) != OpKind::kKernelVarying) continue;
    const v1::TensorArgument* input = Input(op, 0);
    if (input == nullptr) continue;
    const std::optional<v1::Precision> precision = PrecisionOfDtype(input->dtype());
    if (!precision.has_value()) continue;
    ++inputs;
    ++dtypes[*precision];
  }
  if (inputs == 0) return std::nullopt;
  const auto [precision, agreeing] = MostCommon(dtypes);
  if (2 * agreeing <= inputs) return std::nullopt;
  return Inferred<v1::Precision>{
      precision,
      absl::StrCat("the data type of ", agreeing, " of ", inputs,
                   " kernel-varying op inputs (matrix multiplies, convolutions, RNNs, attention)")};
}

}  // namespace habitat
