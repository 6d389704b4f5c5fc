#include "core/trace/math_mode.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "core/trace/op_classification.h"

namespace habitat {
namespace {

using v1::Operation;
using v1::Pass;
using v1::Trace;

bool HasAny(absl::string_view s, std::initializer_list<absl::string_view> needles) {
  for (absl::string_view n : needles) {
    if (absl::StrContains(s, n)) return true;
  }
  return false;
}

// Matrix-multiply, convolution and attention kernels: the ones whose units
// depend on the math mode. Layout transforms, split-K reductions and
// workspace initialisation run around them and tell nothing (cuDNN
// transposes bf16 to fp32 and back around a TF32 engine).
bool IsMathKernel(absl::string_view lower) {
  if (HasAny(lower, {"init_device_workspace", "reduce"})) return false;
  return HasAny(lower, {"gemm", "gemv", "_xmma_", "fprop", "dgrad", "wgrad", "fft", "winograd",
                        "convolve", "scudnn", "hcudnn", "884cudnn", "1688cudnn", "fmha",
                        "flash_fwd", "flash_bwd", "sdpa", "attention"});
}

// cuBLAS's Hopper+ kernels, e.g. nvjet_sm90_tst_128x128_64x6_4x2_h_bz_NNT:
// the letters after the prefix are the A/B, compute and C/D types
// (t = bf16, h = fp16, s = fp32). fp32 inputs run in TF32 only (the name
// then says tf32: nvjet_sss_tf32_...); others (fp8, emulated fp32) are not
// modes we model.
KernelMath NvjetMath(absl::string_view lower) {
  absl::ConsumePrefix(&lower, "nvjet_");
  if (absl::StartsWith(lower, "sm")) {
    const size_t underscore = lower.find('_');
    if (underscore == absl::string_view::npos) return KernelMath::kNone;
    lower.remove_prefix(underscore + 1);
  }
  if (lower.size() < 4 || lower[3] != '_') return KernelMath::kNone;
  switch (lower[0]) {
    case 't':
      return KernelMath::kBf16;
    case 'h':
      return KernelMath::kFp16;
    case 's':
      return absl::StrContains(lower, "tf32") ? KernelMath::kTf32 : KernelMath::kNone;
    default:
      return KernelMath::kNone;
  }
}

// Duration (ns) of a pass's math kernels by what their names say; every
// kernel counts at least 1 ns so that presence shows without durations.
struct Tally {
  std::array<int64_t, 6> ns{};
  int64_t operator[](KernelMath k) const { return ns[static_cast<int>(k)]; }
  int64_t half() const {
    return (*this)[KernelMath::kFp16] + (*this)[KernelMath::kBf16] + (*this)[KernelMath::kHalf];
  }
  int64_t full() const { return (*this)[KernelMath::kFp32] + (*this)[KernelMath::kTf32]; }
  void Add(const Tally& o) {
    for (size_t i = 0; i < ns.size(); ++i) ns[i] += o.ns[i];
  }
};

Tally TallyPass(const Pass& pass) {
  Tally t;
  for (const auto& k : pass.kernels()) {
    const KernelMath m = ClassifyKernelMath(k.name());
    if (m == KernelMath::kNone) continue;
    t.ns[static_cast<int>(m)] += (k.duration_ns() > 0 ? k.duration_ns() : 0) + 1;
  }
  return t;
}

// The definite half type with more time; nullopt if neither ran.
std::optional<MathMode> DominantHalf(const Tally& t) {
  const int64_t bf16 = t[KernelMath::kBf16], fp16 = t[KernelMath::kFp16];
  if (bf16 == 0 && fp16 == 0) return std::nullopt;
  return bf16 >= fp16 ? MathMode::kBf16 : MathMode::kFp16;
}

std::optional<MathMode> DominantFull(const Tally& t) {
  const int64_t tf32 = t[KernelMath::kTf32], fp32 = t[KernelMath::kFp32];
  if (tf32 == 0 && fp32 == 0) return std::nullopt;
  return tf32 >= fp32 ? MathMode::kTf32 : MathMode::kFp32;
}

absl::string_view BareName(absl::string_view name) {
  absl::ConsumePrefix(&name, "aten::");
  absl::ConsumePrefix(&name, "autograd::engine::evaluate_function: ");
  return name;
}

// cuDNN RNNs: torch.autocast casts them to fp16 whatever its dtype
// (aten/src/ATen/cudnn/AutocastRNN.cpp); the bf16 GNMT captures in
// tests/testdata run fp16 LSTM kernels.
bool IsRnn(absl::string_view name) {
  const absl::string_view bare = BareName(name);
  return bare == "lstm" || bare == "gru" || bare == "rnn_tanh" || bare == "rnn_relu" ||
         bare == "_cudnn_rnn" || absl::StartsWith(bare, "CudnnRnnBackward");
}

enum class Family { kMatmul, kCudnn, kOther };

// The library whose TF32 switch governs a kernel-varying op.
Family FamilyOf(absl::string_view name) {
  if (ClassifyOperation(name) != OpKind::kKernelVarying) return Family::kOther;
  const absl::string_view bare = BareName(name);
  if (IsRnn(name) || absl::StrContains(bare, "conv") || absl::StrContains(bare, "Convolution")) {
    return Family::kCudnn;
  }
  if (HasAny(bare, {"attention", "ScaledDotProduct", "transformer_encoder"})) {
    return Family::kOther;  // fused attention kernels ignore the TF32 switches
  }
  return Family::kMatmul;
}

// The half type of the op's tensor arguments (the more frequent one).
std::optional<MathMode> HalfOfTensors(const Operation& op) {
  int bf16 = 0, fp16 = 0;
  for (const auto& a : op.arguments()) {
    if (!a.has_tensor()) continue;
    const auto half = HalfOfDtype(a.tensor().dtype());
    if (half == MathMode::kBf16) ++bf16;
    if (half == MathMode::kFp16) ++fp16;
  }
  if (bf16 == 0 && fp16 == 0) return std::nullopt;
  return bf16 >= fp16 ? MathMode::kBf16 : MathMode::kFp16;
}

bool HasTensorDtypes(const Operation& op) {
  for (const auto& a : op.arguments()) {
    if (a.has_tensor() && !a.tensor().dtype().empty()) return true;
  }
  return false;
}

absl::string_view SettingsEvidence(const Trace& trace) {
  return trace.math().source() == "inferred" ? kEvidenceInferredSettings
                                             : kEvidenceRecordedSettings;
}

// The dtype torch.autocast cast to, with its evidence; nullopt for none or
// not known.
std::optional<OpMathMode> AutocastOf(const Trace& trace) {
  if (trace.has_math() && trace.math().has_autocast_dtype()) {
    const std::string& d = trace.math().autocast_dtype();
    const std::string evidence(SettingsEvidence(trace));
    if (d == "bf16") return OpMathMode{MathMode::kBf16, evidence};
    if (d == "fp16") return OpMathMode{MathMode::kFp16, evidence};
    return std::nullopt;  // recorded or inferred: no autocast
  }
  const std::string evidence(kEvidenceRecordedSettings);
  if (trace.precision() == v1::PRECISION_AMP_BF16) return OpMathMode{MathMode::kBf16, evidence};
  if (trace.precision() == v1::PRECISION_AMP_FP16) return OpMathMode{MathMode::kFp16, evidence};
  return std::nullopt;
}

// Step 2 of the rule (also for a half-precision op whose kernels did not
// say which half type): autocast, then the tensors' half dtype, then a
// half `precision` when no dtypes were recorded.
std::optional<OpMathMode> HalfFromContext(const Trace& trace, const Operation& op) {
  if (ClassifyOperation(op.name()) == OpKind::kKernelVarying) {
    if (auto autocast = AutocastOf(trace)) {
      if (IsRnn(op.name())) autocast->mode = MathMode::kFp16;
      return autocast;
    }
  }
  if (auto half = HalfOfTensors(op)) {
    return OpMathMode{*half, std::string(kEvidenceTensorDtypes)};
  }
  if (!HasTensorDtypes(op)) {
    const std::string evidence(kEvidenceRecordedSettings);
    if (trace.precision() == v1::PRECISION_BF16) return OpMathMode{MathMode::kBf16, evidence};
    if (trace.precision() == v1::PRECISION_FP16) return OpMathMode{MathMode::kFp16, evidence};
  }
  return std::nullopt;
}

}  // namespace

KernelMath ClassifyKernelMath(absl::string_view kernel_name) {
  const std::string lower_name = absl::AsciiStrToLower(kernel_name);
  absl::string_view s = lower_name;
  absl::ConsumePrefix(&s, "void ");
  if (absl::StartsWith(s, "nvjet_")) return NvjetMath(s);
  if (!IsMathKernel(s)) return KernelMath::kNone;
  // Element types in the name: sm90_xmma_gemm_f32f32_tf32f32_f32,
  // cutlass_80_tensorop_bf16_s16816gemm_bf16, cutlass::tfloat32_t, ...
  if (HasAny(s, {"tf32", "tfloat32"})) return KernelMath::kTf32;
  if (HasAny(s, {"bf16", "bfloat16"})) return KernelMath::kBf16;
  // cuDNN's runtime-compiled kernels say f16 for both half types
  // (cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_... in the
  // bf16 captures).
  if (absl::StrContains(s, "cudnn_generated") && absl::StrContains(s, "f16")) {
    return KernelMath::kHalf;
  }
  if (HasAny(s, {"f16", "fp16", "__half", "half_t", "h884", "h1688", "h16816", "hmma", "hgemm",
                 "hcudnn", "s884"})) {
    return KernelMath::kFp16;
  }
  // Tensor-core instruction shapes on fp32 elements: TF32
  // (cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4).
  if (HasAny(s, {"s1688", "s16816"})) return KernelMath::kTf32;
  // CUDA-core fp32: sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma,
  // cutlass_80_simt_sgemm, volta_scudnn, implicit_convolve_sgemm<float>,
  // fft2d_r2c_32x32<float>, fmha_cutlassF_f32 (PyTorch's memory-efficient
  // attention on fp32 inputs).
  if (HasAny(s, {"f32", "fp32", "ffma", "sgemm", "scudnn", "simt", "<float", "float,", "fft"})) {
    return KernelMath::kFp32;
  }
  return KernelMath::kNone;
}

absl::string_view MathModeName(MathMode mode) {
  switch (mode) {
    case MathMode::kFp32:
      return "fp32";
    case MathMode::kTf32:
      return "tf32";
    case MathMode::kFp16:
      return "fp16";
    case MathMode::kBf16:
      return "bf16";
  }
  return "fp32";
}

OpMathMode InferOpMathMode(const Trace& trace, const Operation& op, bool cudnn_family) {
  const Tally forward = TallyPass(op.forward());
  const Tally backward = TallyPass(op.backward());
  const std::string kernels(kEvidenceKernelNames);

  // 1. The op's own kernels.
  if (forward.half() + backward.half() > 0) {
    if (auto half = DominantHalf(forward)) return OpMathMode{*half, kernels};
    if (auto half = DominantHalf(backward)) return OpMathMode{*half, kernels};
    if (auto half = HalfFromContext(trace, op)) return *half;
    return OpMathMode{MathMode::kFp16, kernels};
  }
  if (auto full = DominantFull(forward)) return OpMathMode{*full, kernels};
  if (auto full = DominantFull(backward)) return OpMathMode{*full, kernels};

  // 2. Autocast, then the tensors' dtypes.
  if (auto half = HalfFromContext(trace, op)) return *half;

  // 3. The trace's TF32 setting for the op's library.
  if (trace.has_math()) {
    const v1::MathSettings& m = trace.math();
    const std::string evidence(SettingsEvidence(trace));
    if (cudnn_family && m.has_cudnn_tf32()) {
      return OpMathMode{m.cudnn_tf32() ? MathMode::kTf32 : MathMode::kFp32, evidence};
    }
    if (!cudnn_family) {
      if (m.has_matmul_tf32()) {
        return OpMathMode{m.matmul_tf32() ? MathMode::kTf32 : MathMode::kFp32, evidence};
      }
      const std::string& p = m.float32_matmul_precision();
      if (p == "high" || p == "medium") return OpMathMode{MathMode::kTf32, evidence};
      if (p == "highest") return OpMathMode{MathMode::kFp32, evidence};
    }
  }
  if (trace.precision() == v1::PRECISION_TF32) {
    return OpMathMode{MathMode::kTf32, std::string(kEvidenceRecordedSettings)};
  }

  // 4. PyTorch's defaults: allow_tf32 is false for cuBLAS, true for cuDNN.
  return OpMathMode{cudnn_family ? MathMode::kTf32 : MathMode::kFp32,
                    std::string(kEvidencePyTorchDefaults)};
}

std::optional<MathMode> PassKernelMathMode(const Pass& pass) {
  const Tally t = TallyPass(pass);
  if (t.half() > 0) return DominantHalf(t);
  return DominantFull(t);
}

std::optional<v1::MathSettings> InferMathSettings(const Trace& trace) {
  Tally matmul, cudnn;          // fp32-data ops of each library
  int64_t autocast_ns[2] = {};  // bf16, fp16
  int64_t no_autocast_ns = 0;
  for (const Operation& op : trace.operations()) {
    if (ClassifyOperation(op.name()) != OpKind::kKernelVarying) continue;
    const Family family = FamilyOf(op.name());
    Tally t = TallyPass(op.forward());
    t.Add(TallyPass(op.backward()));
    if (t.half() == 0) {
      if (family == Family::kMatmul) matmul.Add(t);
      if (family == Family::kCudnn) cudnn.Add(t);
    }
    if (IsRnn(op.name()) || !HasTensorDtypes(op)) continue;
    // Autocast: half kernels on inputs that are not all of that half type
    // (fp32 weights, or the other half type) mean the op cast them; fp32
    // kernels on all-fp32 inputs mean it did not.
    bool all_float = true;
    for (const auto& a : op.arguments()) {
      if (a.has_tensor() && !a.tensor().dtype().empty() && !IsFloatDtype(a.tensor().dtype())) {
        all_float = false;
      }
    }
    if (const auto half = DominantHalf(t)) {
      bool all_half = true;
      for (const auto& a : op.arguments()) {
        if (a.has_tensor() && !a.tensor().dtype().empty() &&
            HalfOfDtype(a.tensor().dtype()) != half) {
          all_half = false;
        }
      }
      if (!all_half) autocast_ns[*half == MathMode::kBf16 ? 0 : 1] += t.half();
    } else if (t.half() == 0 && all_float) {
      no_autocast_ns += t.full();
    }
  }

  v1::MathSettings m;
  bool any = false;
  if (matmul.full() > 0) {
    // TF32 kernels run only where TF32 is allowed.
    m.set_matmul_tf32(matmul[KernelMath::kTf32] > 0);
    m.set_float32_matmul_precision(m.matmul_tf32() ? "high" : "highest");
    any = true;
  }
  if (cudnn.full() > 0) {
    m.set_cudnn_tf32(cudnn[KernelMath::kTf32] > 0);
    any = true;
  }
  if (autocast_ns[0] + autocast_ns[1] > 0) {
    m.set_autocast_dtype(autocast_ns[0] >= autocast_ns[1] ? "bf16" : "fp16");
    any = true;
  } else if (no_autocast_ns > 0) {
    m.set_autocast_dtype("");
    any = true;
  }
  if (!any) return std::nullopt;
  m.set_source("inferred");
  return m;
}

std::optional<MathMode> HalfOfDtype(absl::string_view dtype) {
  if (absl::EndsWith(dtype, "BFloat16")) return MathMode::kBf16;
  if (absl::EndsWith(dtype, "Half")) return MathMode::kFp16;
  return std::nullopt;
}

bool IsFloatDtype(absl::string_view dtype) { return dtype == "float"; }

}  // namespace habitat
