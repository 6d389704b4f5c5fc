// Which math units an operation ran on at the origin: fp32 CUDA cores, TF32
// tensor cores, fp16 or bf16. A target GPU may lack the units the origin
// used (no TF32 before Ampere, no bf16 tensor cores on V100 or T4), so the
// predictor needs the mode per operation. This file owns the rule, and the
// kernel-name patterns it reads, for both the predictor and the Kineto
// importer (which infers the trace's MathSettings from them).
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

enum class MathMode { kFp32, kTf32, kFp16, kBf16 };

// Values of OpMathMode::evidence.
inline constexpr absl::string_view kEvidenceKernelNames = "kernel names";
inline constexpr absl::string_view kEvidenceTensorDtypes = "tensor dtypes";
// The trace's MathSettings as the agent recorded them, or its `precision`.
inline constexpr absl::string_view kEvidenceRecordedSettings = "recorded settings";
// The trace's MathSettings as an importer inferred them from kernel names
// of other operations.
inline constexpr absl::string_view kEvidenceInferredSettings = "inferred settings";
inline constexpr absl::string_view kEvidencePyTorchDefaults = "PyTorch defaults";

struct OpMathMode {
  MathMode mode;
  std::string evidence;  // one of the kEvidence* values
};

// The mode `op` ran in. cudnn_family: convolutions and RNNs (cuDNN) rather
// than matrix multiplies (cuBLAS); it picks the TF32 setting that applies.
// In order:
//  1. The op's own kernel names (forward pass, then backward), where they
//     say which units ran. Half-precision kernels win over fp32/TF32 ones
//     anywhere in the op: cuDNN may run a bf16 convolution on TF32 tensor
//     cores through fp32 copies, never the reverse.
//  2. For an op torch.autocast casts (the kernel-varying ones), the trace's
//     autocast dtype (MathSettings, else `precision` AMP_*); cuDNN RNNs run
//     in fp16 under either dtype. Otherwise half tensor dtypes
//     (c10::BFloat16, c10::Half), or `precision` BF16/FP16 for an op
//     without recorded dtypes.
//  3. The trace's TF32 setting for the family (MathSettings, else
//     `precision` TF32).
//  4. PyTorch's defaults: fp32 matmuls, TF32 cuDNN.
OpMathMode InferOpMathMode(const v1::Trace& trace, const v1::Operation& op, bool cudnn_family);

// The mode one pass's own kernel names say it ran in: half kernels first
// (the half type with more time), else fp32 or TF32 by time; nullopt when
// they do not say. A pass can differ from its op's mode: cuDNN runs the
// forward of a 3-channel convolution on CUDA cores and its weight gradient
// on TF32 tensor cores.
std::optional<MathMode> PassKernelMathMode(const v1::Pass& pass);

// "fp32", "tf32", "fp16", "bf16".
absl::string_view MathModeName(MathMode mode);

// A recorded tensor dtype as torch spells it: bf16 or fp16 for its half
// types ("c10::BFloat16", "c10::Half"), nullopt otherwise; IsFloatDtype is
// true for fp32 ("float").
std::optional<MathMode> HalfOfDtype(absl::string_view dtype);
bool IsFloatDtype(absl::string_view dtype);

// What one kernel's name says about the units it ran on.
enum class KernelMath {
  kNone,  // not a matmul/convolution/attention kernel, or the name does not say
  kFp32,  // CUDA cores (SIMT: sgemm, ffma, f32f32_f32f32, fft, ...)
  kTf32,
  kFp16,
  kBf16,
  kHalf,  // fp16 or bf16, the name does not say which (cuDNN's "f16")
};

KernelMath ClassifyKernelMath(absl::string_view kernel_name);

// The MathSettings (source "inferred") that the kernel names of the whole
// trace show: matmul_tf32 from fp32 cuBLAS-family operations (TF32 kernels
// seen: true; only fp32 CUDA-core kernels: false), cudnn_tf32 likewise from
// convolutions and RNNs, float32_matmul_precision "high"/"highest" with
// matmul_tf32, autocast_dtype from castable operations whose tensor inputs
// are all fp32 (half kernels: that dtype; fp32/TF32 kernels: ""). Fields
// without evidence stay unset; nullopt when no field has any.
std::optional<v1::MathSettings> InferMathSettings(const v1::Trace& trace);

}  // namespace habitat
