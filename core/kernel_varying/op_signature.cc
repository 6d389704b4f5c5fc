#include "core/kernel_varying/op_signature.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace habitat {
namespace kernel_varying {
namespace {

using habitat::v1::Argument;
using habitat::v1::Operation;
using habitat::v1::TensorArgument;
using Result = absl::StatusOr<std::optional<OpSignature>>;
using Pair = std::array<int64_t, 2>;

std::string ShapeText(const TensorArgument& t) {
  return absl::StrCat("[", absl::StrJoin(t.shape(), ", "), "]");
}

bool HasZeroDim(const TensorArgument& t) {
  for (int64_t d : t.shape()) {
    if (d == 0) return true;
  }
  return false;
}

bool IsFloatLike(const std::string& dtype) {
  // "" is a TensorList element, whose dtype Kineto does not record.
  return dtype.empty() || dtype == "float" || dtype == "c10::BFloat16" || dtype == "c10::Half";
}

// Typed access to the recorded arguments, with errors naming the op and the
// argument.
class Args {
 public:
  explicit Args(const Operation& op) : op_(op) {
    for (const Argument& a : op.arguments()) by_name_.emplace(a.name(), &a);
  }

  absl::Status Error(absl::string_view name, absl::string_view problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat("operation \"", op_.name(), "\" argument \"", name, "\": ", problem));
  }

  const Argument* Find(absl::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }

  // Recorded, and not None.
  bool Present(absl::string_view name) const {
    const Argument* a = Find(name);
    return a != nullptr && a->value_case() != Argument::kNone &&
           a->value_case() != Argument::VALUE_NOT_SET;
  }

  absl::StatusOr<const TensorArgument*> Tensor(absl::string_view name) const {
    const Argument* a = Find(name);
    if (a == nullptr) return Error(name, "missing");
    if (!a->has_tensor()) return Error(name, "is not a tensor");
    for (int64_t d : a->tensor().shape()) {
      if (d < 0) {
        return Error(name, absl::StrCat("negative size in shape ", ShapeText(a->tensor())));
      }
    }
    return &a->tensor();
  }

  // nullptr when not recorded or None.
  absl::StatusOr<const TensorArgument*> OptionalTensor(absl::string_view name) const {
    if (!Present(name)) return nullptr;
    return Tensor(name);
  }

  // Kineto records a Python int passed as "Scalar" as a double.
  absl::StatusOr<int64_t> Int(absl::string_view name, int64_t fallback) const {
    if (!Present(name)) return fallback;
    const Argument* a = Find(name);
    if (a->has_integer()) return a->integer();
    if (a->has_scalar() && std::isfinite(a->scalar()) && a->scalar() == std::trunc(a->scalar()) &&
        std::fabs(a->scalar()) < 9e15) {
      return static_cast<int64_t>(a->scalar());
    }
    return Error(name, "is not an integer");
  }

  absl::StatusOr<bool> Bool(absl::string_view name, bool fallback) const {
    if (!Present(name)) return fallback;
    const Argument* a = Find(name);
    if (a->has_boolean()) return a->boolean();
    if (a->has_integer() && (a->integer() == 0 || a->integer() == 1)) {
      return a->integer() == 1;
    }
    if (a->has_scalar() && (a->scalar() == 0 || a->scalar() == 1)) {
      return a->scalar() == 1;
    }
    return Error(name, "is not a boolean");
  }

  // A 2-D size argument: a list of two, or one value (or a list of one) that
  // ATen expands to both dimensions.
  absl::StatusOr<Pair> IntPair(absl::string_view name, int64_t fallback) const {
    if (!Present(name)) return Pair{fallback, fallback};
    const Argument* a = Find(name);
    if (a->has_integers()) {
      const auto& v = a->integers().values();
      if (v.size() == 1) return Pair{v[0], v[0]};
      if (v.size() == 2) return Pair{v[0], v[1]};
      return Error(name, absl::StrCat("has ", v.size(), " values, expected 2"));
    }
    HABITAT_ASSIGN_OR_RETURN(int64_t v, Int(name, fallback));
    return Pair{v, v};
  }

  // TensorList "name": elements "name.0", "name.1", ... nullopt when the
  // trace did not record the element shapes.
  absl::StatusOr<std::optional<std::vector<const TensorArgument*>>> List(
      absl::string_view name) const {
    std::vector<const TensorArgument*> out;
    for (size_t j = 0;; ++j) {
      const std::string element = absl::StrCat(name, ".", j);
      if (Find(element) == nullptr) break;
      HABITAT_ASSIGN_OR_RETURN(const TensorArgument* t, Tensor(element));
      out.push_back(t);
    }
    if (out.empty()) return std::nullopt;
    return out;
  }

 private:
  const Operation& op_;
  absl::flat_hash_map<std::string, const Argument*> by_name_;
};

OpSignature Make(Family family) {
  OpSignature s;
  s.family = family;
  return s;
}

// Product of dims [begin, end); false past 2^53 (no real tensor is that
// large, and the features are doubles).
bool Product(const TensorArgument& t, int begin, int end, int64_t* out) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) {
    if (__builtin_mul_overflow(p, t.shape(i), &p) || p > (int64_t{1} << 53)) return false;
  }
  *out = p;
  return true;
}

// [M, K] x [K, N] (mm, addmm).
Result Matrices(const Args& args, const char* a_name, const char* b_name, bool bias) {
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* a, args.Tensor(a_name));
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* b, args.Tensor(b_name));
  if (a->shape_size() != 2 || b->shape_size() != 2 || a->shape(1) != b->shape(0)) {
    return args.Error(
        b_name, absl::StrCat("shapes ", ShapeText(*a), " and ", ShapeText(*b), " do not multiply"));
  }
  if (HasZeroDim(*a) || HasZeroDim(*b)) return std::nullopt;
  OpSignature s = Make(Family::kLinear);
  s.config[kM] = a->shape(0);
  s.config[kK] = a->shape(1);
  s.config[kN] = b->shape(1);
  s.config[kBias] = bias ? 1 : 0;
  return s;
}

// [B, M, K] x [B, K, N] (bmm, baddbmm).
Result Batched(const Args& args, const char* a_name, const char* b_name, bool bias) {
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* a, args.Tensor(a_name));
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* b, args.Tensor(b_name));
  if (a->shape_size() != 3 || b->shape_size() != 3 || a->shape(0) != b->shape(0) ||
      a->shape(2) != b->shape(1)) {
    return args.Error(b_name, absl::StrCat("shapes ", ShapeText(*a), " and ", ShapeText(*b),
                                           " do not batch-multiply"));
  }
  if (HasZeroDim(*a) || HasZeroDim(*b)) return std::nullopt;
  OpSignature s = Make(Family::kBmm);
  s.config[kB] = a->shape(0);
  s.config[kM] = a->shape(1);
  s.config[kK] = a->shape(2);
  s.config[kN] = b->shape(2);
  // baddbmm's added [B, M, N] term; the training set's bmm has none.
  s.config[kBias] = bias ? 1 : 0;
  return s;
}

Result Linear(const Args& args) {
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* x, args.Tensor("0"));
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* w, args.Tensor("1"));
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* bias, args.OptionalTensor("2"));
  if (w->shape_size() == 1) return std::nullopt;  // a vector product
  if (x->shape_size() < 1 || w->shape_size() != 2 || x->shape(x->shape_size() - 1) != w->shape(1)) {
    return args.Error(
        "1", absl::StrCat("weight ", ShapeText(*w), " does not fit input ", ShapeText(*x)));
  }
  if (HasZeroDim(*x) || HasZeroDim(*w)) return std::nullopt;
  OpSignature s = Make(Family::kLinear);
  if (!Product(*x, 0, x->shape_size() - 1, &s.config[kM])) {
    return args.Error("0", absl::StrCat("input ", ShapeText(*x), " is implausibly large"));
  }
  s.config[kK] = w->shape(1);
  s.config[kN] = w->shape(0);
  s.config[kBias] = bias != nullptr ? 1 : 0;
  return s;
}

// torch.matmul's cases (ATen folds N-D x 2-D into one mm, and runs N-D x N-D
// with equal batch dimensions as one bmm). Vector products and broadcast
// batches are not covered.
Result Matmul(const Args& args) {
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* a, args.Tensor("0"));
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* b, args.Tensor("1"));
  const int ra = a->shape_size(), rb = b->shape_size();
  if (ra == 0 || rb == 0) {
    return args.Error("1", "matmul of a zero-dimensional tensor");
  }
  if (ra == 1 || rb == 1) return std::nullopt;
  if (a->shape(ra - 1) != b->shape(rb - 2)) {
    return args.Error(
        "1", absl::StrCat("shapes ", ShapeText(*a), " and ", ShapeText(*b), " do not multiply"));
  }
  if (HasZeroDim(*a) || HasZeroDim(*b)) return std::nullopt;
  if (rb == 2) {
    OpSignature s = Make(Family::kLinear);
    if (!Product(*a, 0, ra - 1, &s.config[kM])) {
      return args.Error("0", absl::StrCat(ShapeText(*a), " is implausibly large"));
    }
    s.config[kK] = a->shape(ra - 1);
    s.config[kN] = b->shape(1);
    return s;
  }
  if (ra < 3 || ra != rb) return std::nullopt;
  for (int i = 0; i < ra - 2; ++i) {
    if (a->shape(i) != b->shape(i)) return std::nullopt;  // broadcast
  }
  OpSignature s = Make(Family::kBmm);
  if (!Product(*a, 0, ra - 2, &s.config[kB])) {
    return args.Error("0", absl::StrCat(ShapeText(*a), " is implausibly large"));
  }
  s.config[kM] = a->shape(ra - 2);
  s.config[kK] = a->shape(ra - 1);
  s.config[kN] = b->shape(rb - 1);
  return s;
}

struct ConvArgs {
  bool transposed = false;
  const char* stride = "3";
  const char* padding = "4";
  const char* dilation = "5";
  const char* groups = "6";
  const char* output_padding = nullptr;  // none for conv2d
  // aten::convolution also runs 1-D and 3-D convolutions: not an error.
  bool any_rank = false;
};

Result Conv(const Args& args, const ConvArgs& c) {
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* x, args.Tensor("0"));
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* w, args.Tensor("1"));
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* bias, args.OptionalTensor("2"));
  if (w->shape_size() != 4) {
    if (c.any_rank) return std::nullopt;
    return args.Error("1", absl::StrCat("weight ", ShapeText(*w), " is not 4-D"));
  }
  if (x->shape_size() != 4 && x->shape_size() != 3) {
    return args.Error("0", absl::StrCat("input ", ShapeText(*x), " is neither 3-D nor 4-D"));
  }
  const bool batched = x->shape_size() == 4;
  const int64_t b = batched ? x->shape(0) : 1;
  const int off = batched ? 1 : 0;
  const int64_t channels = x->shape(off), h = x->shape(off + 1), width = x->shape(off + 2);
  HABITAT_ASSIGN_OR_RETURN(Pair stride, args.IntPair(c.stride, 1));
  // conv2d's string padding: "valid" is 0, "same" keeps the size.
  const Argument* padding_arg = args.Find(c.padding);
  const bool same =
      padding_arg != nullptr && padding_arg->has_text() && padding_arg->text() == "same";
  const bool valid =
      padding_arg != nullptr && padding_arg->has_text() && padding_arg->text() == "valid";
  Pair padding = {0, 0};
  if (!same && !valid) {
    HABITAT_ASSIGN_OR_RETURN(padding, args.IntPair(c.padding, 0));
  }
  HABITAT_ASSIGN_OR_RETURN(Pair dilation, args.IntPair(c.dilation, 1));
  HABITAT_ASSIGN_OR_RETURN(int64_t groups, args.Int(c.groups, 1));
  Pair output_padding = {0, 0};
  if (c.output_padding != nullptr) {
    HABITAT_ASSIGN_OR_RETURN(output_padding, args.IntPair(c.output_padding, 0));
  }
  if (groups < 1) return args.Error(c.groups, "groups must be at least 1");
  if (stride[0] < 1 || stride[1] < 1) {
    return args.Error(c.stride, "stride must be at least 1");
  }
  if (dilation[0] < 1 || dilation[1] < 1) {
    return args.Error(c.dilation, "dilation must be at least 1");
  }
  if (same) {
    if (stride[0] != 1 || stride[1] != 1) {
      return args.Error(c.padding, "padding \"same\" needs stride 1");
    }
    // Symmetric only when the kernel is odd (dilation is 1 below).
    if (w->shape(2) != w->shape(3) || w->shape(2) % 2 == 0) return std::nullopt;
    padding = {(w->shape(2) - 1) / 2, (w->shape(2) - 1) / 2};
  }
  if (padding[0] < 0 || padding[1] < 0 || output_padding[0] < 0 || output_padding[1] < 0) {
    return args.Error(c.padding, "negative padding");
  }
  // The weight is [C_out, C_in / groups, k, k], transposed [C_in, C_out / groups, k, k].
  // (Division, not multiplication: a damaged groups value must not overflow.)
  const bool fits = c.transposed ? w->shape(0) == channels
                                 : channels % groups == 0 && w->shape(1) == channels / groups;
  if (!fits) {
    return args.Error("1", absl::StrCat("weight ", ShapeText(*w), " with groups ", groups,
                                        " does not fit input ", ShapeText(*x)));
  }
  if (HasZeroDim(*x) || HasZeroDim(*w)) return std::nullopt;
  if (groups != 1 || dilation != Pair{1, 1} || output_padding != Pair{0, 0} ||
      stride[0] != stride[1] || padding[0] != padding[1] || w->shape(2) != w->shape(3) ||
      h != width) {
    return std::nullopt;
  }
  OpSignature s = Make(c.transposed ? Family::kConvTranspose2d : Family::kConv2d);
  s.config[kB] = b;
  s.config[kCIn] = channels;
  s.config[kCOut] = c.transposed ? w->shape(1) * groups : w->shape(0);
  s.config[kKernel] = w->shape(2);
  s.config[kStride] = stride[0];
  s.config[kPadding] = padding[0];
  s.config[kSize] = h;
  s.config[kBias] = bias != nullptr ? 1 : 0;
  return s;
}

Result Convolution(const Args& args) {
  HABITAT_ASSIGN_OR_RETURN(bool transposed, args.Bool("6", false));
  ConvArgs c;
  c.transposed = transposed;
  c.output_padding = "7";
  c.groups = "8";
  c.any_rank = true;
  return Conv(args, c);
}

// aten::lstm(input, hx[], params[], has_biases, num_layers, dropout, train,
// bidirectional, batch_first). The packed-sequence overload (a tensor of
// batch sizes as argument 1) is not covered: its batch is not recorded.
Result Lstm(const Args& args) {
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* x, args.Tensor("0"));
  const Argument* second = args.Find("1");
  if (second != nullptr && second->has_tensor()) return std::nullopt;
  HABITAT_ASSIGN_OR_RETURN(auto params, args.List("2"));
  HABITAT_ASSIGN_OR_RETURN(auto hx, args.List("1"));
  HABITAT_ASSIGN_OR_RETURN(bool has_biases, args.Bool("3", true));
  HABITAT_ASSIGN_OR_RETURN(int64_t layers, args.Int("4", 1));
  HABITAT_ASSIGN_OR_RETURN(bool bidirectional, args.Bool("7", false));
  HABITAT_ASSIGN_OR_RETURN(bool batch_first, args.Bool("8", false));
  if (layers < 1) return args.Error("4", "num_layers must be at least 1");
  if (x->shape_size() != 3 && x->shape_size() != 2) {
    return args.Error("0", absl::StrCat("input ", ShapeText(*x), " is neither 2-D nor 3-D"));
  }
  const bool batched = x->shape_size() == 3;
  const int64_t seq = batched && batch_first ? x->shape(1) : x->shape(0);
  const int64_t b = !batched ? 1 : batch_first ? x->shape(0) : x->shape(1);
  const int64_t input_size = x->shape(x->shape_size() - 1);
  const int64_t directions = bidirectional ? 2 : 1;

  // Hidden size from the first layer's weights [4H, I], [4H, H] (else h_0).
  int64_t hidden = 0;
  if (params.has_value()) {
    const size_t per = has_biases ? 4 : 2;
    const size_t expected = static_cast<size_t>(layers * directions) * per;
    if (params->size() == static_cast<size_t>(layers * directions) * (per + 1)) {
      return std::nullopt;  // proj_size > 0: a projection per layer
    }
    if (params->size() != expected) {
      return args.Error("2", absl::StrCat(params->size(), " parameter tensors, expected ", expected,
                                          " for ", layers, " layer(s)"));
    }
    const TensorArgument& w_ih = *(*params)[0];
    if (w_ih.shape_size() != 2 || w_ih.shape(0) % 4 != 0 || w_ih.shape(1) != input_size) {
      return args.Error(
          "2.0", absl::StrCat("weight ", ShapeText(w_ih), " does not fit input ", ShapeText(*x)));
    }
    hidden = w_ih.shape(0) / 4;
  } else if (hx.has_value()) {
    const TensorArgument& h0 = *(*hx)[0];
    if (h0.shape_size() < 1) return args.Error("1.0", "h_0 is a scalar");
    hidden = h0.shape(h0.shape_size() - 1);
    if (hx->size() >= 2 && (*hx)[1]->shape_size() >= 1 &&
        (*hx)[1]->shape((*hx)[1]->shape_size() - 1) != hidden) {
      return std::nullopt;  // proj_size > 0: h_0 and c_0 differ
    }
  } else {
    return std::nullopt;  // neither list's shapes recorded
  }
  if (HasZeroDim(*x) || hidden == 0) return std::nullopt;
  OpSignature s = Make(Family::kLstm);
  s.config[kB] = b;
  s.config[kSeq] = seq;
  s.config[kK] = input_size;
  s.config[kN] = hidden;
  s.config[kLayers] = layers;
  s.config[kBias] = has_biases ? 1 : 0;
  s.direction_factor = static_cast<int>(directions);
  return s;
}

// scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
// is_causal, *, scale, enable_gqa): self-attention on [B, H, L, D] without
// a mask (what the predictor was trained on).
Result Sdpa(const Args& args) {
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* q, args.Tensor("0"));
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* k, args.Tensor("1"));
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* v, args.Tensor("2"));
  HABITAT_ASSIGN_OR_RETURN(const TensorArgument* mask, args.OptionalTensor("3"));
  HABITAT_ASSIGN_OR_RETURN(bool causal, args.Bool("5", false));
  if (q->shape_size() < 2 || k->shape_size() != q->shape_size() ||
      v->shape_size() != q->shape_size()) {
    return args.Error("1", absl::StrCat("query ", ShapeText(*q), ", key ", ShapeText(*k),
                                        " and value ", ShapeText(*v), " do not fit together"));
  }
  if (q->shape_size() != 4 || mask != nullptr) return std::nullopt;
  for (int i = 0; i < 4; ++i) {
    if (k->shape(i) != q->shape(i) || v->shape(i) != q->shape(i)) {
      return std::nullopt;  // cross-attention, grouped heads
    }
  }
  if (HasZeroDim(*q)) return std::nullopt;
  OpSignature s = Make(Family::kSdpa);
  s.config[kB] = q->shape(0);
  s.config[kHeads] = q->shape(1);
  s.config[kSeq] = q->shape(2);
  s.config[kHeadDim] = q->shape(3);
  s.config[kCausal] = causal ? 1 : 0;
  return s;
}

Result Dispatch(const Operation& op, const Args& args) {
  const std::string& name = op.name();
  if (name == "aten::linear") return Linear(args);
  if (name == "aten::addmm") return Matrices(args, "1", "2", /*bias=*/true);
  if (name == "aten::mm") return Matrices(args, "0", "1", /*bias=*/false);
  if (name == "aten::matmul") return Matmul(args);
  if (name == "aten::bmm") return Batched(args, "0", "1", /*bias=*/false);
  if (name == "aten::baddbmm") return Batched(args, "1", "2", /*bias=*/true);
  if (name == "aten::conv2d") return Conv(args, ConvArgs());
  if (name == "aten::convolution") return Convolution(args);
  if (name == "aten::conv_transpose2d") {
    ConvArgs c;
    c.transposed = true;
    c.output_padding = "5";
    c.groups = "6";
    c.dilation = "7";
    return Conv(args, c);
  }
  if (name == "aten::lstm") return Lstm(args);
  if (name == "aten::scaled_dot_product_attention") return Sdpa(args);
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::optional<OpSignature>> ExtractOpSignature(const Operation& op) {
  // Recorded without shapes: nothing to read.
  if (op.arguments_size() == 0) return std::nullopt;
  for (const Argument& a : op.arguments()) {
    // fp64 and integer tensors run kernels the predictor never saw.
    if (a.has_tensor() && !IsFloatLike(a.tensor().dtype())) return std::nullopt;
  }
  const Args args(op);
  return Dispatch(op, args);
}

}  // namespace kernel_varying
}  // namespace habitat
