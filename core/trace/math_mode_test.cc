// The per-operation math mode on the real H100/H200 captures: the agent's
// own (tests/testdata/agent, agent_suite) and torch.profiler's
// (tests/testdata/kineto), fp32 and bf16 autocast. The captures ran with
// PyTorch's defaults (TF32 off for matmuls, on for cuDNN), recorded in
// tests/testdata/measurements/<gpu>.json and agent_suite/<gpu>/measurements.json.
// Small synthetic traces cover only the rule's edge cases.
#include "core/trace/math_mode.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"
#include "core/kineto/kineto_import.h"
#include "core/trace/op_classification.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

namespace fs = std::filesystem;
using v1::Kernel;
using v1::Operation;
using v1::Trace;

const std::string kDir = HABITAT_TESTDATA_DIR;

// ---------------------------------------------------------------------------
// Kernel names, as they appear in the fixtures.

TEST(ClassifyKernelMathTest, NamesFromTheCaptures) {
  struct Case {
    const char* name;
    KernelMath math;
  };
  const Case cases[] = {
      // cuBLAS on Hopper (bf16 captures; GNMT's fp16 LSTM under autocast).
      {"nvjet_sm90_tst_128x128_64x6_4x2_h_bz_NNT", KernelMath::kBf16},
      {"nvjet_sm90_tss_128x64_64x8_2x1_v_bz_TNT", KernelMath::kBf16},
      {"nvjet_sm90_hsh_128x160_64x5_2x1_v_bz_NNT", KernelMath::kFp16},
      // cuBLAS xmma (fp32 captures: SIMT linears; TF32 inside cuDNN's LSTM).
      {"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
       "aligna4_alignc4_execute_kernel__5x_cublas",
       KernelMath::kFp32},
      {"sm80_xmma_gemm_cf32cf32_f32f32_cf32_nt_n_tilesize32x32x8_stage3_warpsize2x2x1_ffma_"
       "aligna8_alignc8_execute_kernel__5x_cublas",
       KernelMath::kFp32},
      {"sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize32x32x64_stage3_warpsize2x2x1_"
       "tensor16x8x8_aligna4_alignc4_execute_kernel__5x_cublas",
       KernelMath::kTf32},
      // CUTLASS in cuBLAS and cuDNN.
      {"void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>("
       "cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)",
       KernelMath::kFp32},
      {"void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>("
       "cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4::Params)",
       KernelMath::kTf32},
      {"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_128x64_64x3_nn_align2>("
       "cutlass_80_tensorop_bf16_s16816gemm_bf16_128x64_64x3_nn_align2::Params)",
       KernelMath::kBf16},
      {"void cutlass::Kernel2<cutlass_75_wmma_tensorop_s161616gemm_bf16_32x32_32x1_tn_align1>("
       "cutlass_75_wmma_tensorop_s161616gemm_bf16_32x32_32x1_tn_align1::Params)",
       KernelMath::kBf16},
      {"void cutlass__5x_cudnn::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_256x64_16x4_"
       "nhwc_align4>(cutlass_tensorop_s1688fprop_optimized_tf32_256x64_16x4_nhwc_align4::Params)",
       KernelMath::kTf32},
      {"_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock"
       "22ImplicitGemmMultistageINS_4gemm9GemmShapeILi64ELi64ELi32EEENS4_52Conv2dWgradOutput"
       "GradientTileAccessIteratorOptimizedINS_11MatrixShapeILi64ELi32EEENS_10tfloat32_tE",
       KernelMath::kTf32},
      {"_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock"
       "22ImplicitGemmMultistageINS_4gemm9GemmShapeILi128ELi64ELi64EEENS4_52Conv2dWgradOutput"
       "GradientTileAccessIteratorOptimizedINS_11MatrixShapeILi128ELi64EEENS_10bfloat16_tE",
       KernelMath::kBf16},
      // cuDNN convolutions.
      {"sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_"
       "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
       KernelMath::kTf32},
      {"sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_"
       "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
       KernelMath::kBf16},
      {"sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize128x32x8_stage3_"
       "warpsize2x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
       KernelMath::kFp32},
      {"void implicit_convolve_sgemm<__nv_bfloat16, __nv_bfloat16, 1024, 5, 5, 3, 3, 3, 1, "
       "false, false, true>(int, int, int, __nv_bfloat16 const*, int, __nv_bfloat16*)",
       KernelMath::kBf16},
      {"void wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int, float "
       "const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, "
       "int, int, int, int)",
       KernelMath::kFp32},
      {"void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*, int, int, int)",
       KernelMath::kFp32},
      // Attention: PyTorch's memory-efficient kernels on fp32; cuDNN's
      // runtime-compiled SDPA, "f16" for bf16 inputs.
      {"fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
       "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
       KernelMath::kFp32},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_"
       "cga1x1x1_kernel0_0",
       KernelMath::kHalf},
      // Not math kernels: layout transforms, split-K reductions, RNN
      // element-wise steps, workspace set-up.
      {"void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, float, float, false, "
       "true, (cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>)",
       KernelMath::kNone},
      {"void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, float, "
       "float, float, true, false, false, false>(cublasLt::cublasSplitKParams<float>)",
       KernelMath::kNone},
      {"void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(void*, void const*, float, int, "
       "int)",
       KernelMath::kNone},
      {"void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<xmma__5x_cudnn::"
       "implicit_gemm::fprop::Warp_specialized_params_non_template<xmma__5x_cudnn::Grid_"
       "constant_params> >(xmma__5x_cudnn::Grid_constant_params, bool)",
       KernelMath::kNone},
      {"void elemWiseRNNcell<__half, __half, float, (cudnnRNNMode_t)2, (cudnnRNNBiasMode_t)2>(int, "
       "int, int, int, int, bool, __half const*)",
       KernelMath::kNone},
      {"void ampere_lstm_tile16<64, 2>(params_t)", KernelMath::kNone},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ClassifyKernelMath(c.name), c.math) << c.name;
  }
  // Spellings of public traces from other GPUs and libraries.
  EXPECT_EQ(ClassifyKernelMath("nvjet_sss_tf32_128x256_TNT"), KernelMath::kTf32);
  EXPECT_EQ(ClassifyKernelMath("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT"), KernelMath::kFp16);
  EXPECT_EQ(ClassifyKernelMath("volta_sgemm_128x64_nn"), KernelMath::kFp32);
  EXPECT_EQ(ClassifyKernelMath("volta_h884gemm_64x128_ldg8_nn"), KernelMath::kFp16);
  EXPECT_EQ(ClassifyKernelMath("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn"),
            KernelMath::kFp16);
  EXPECT_EQ(ClassifyKernelMath("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_nn"),
            KernelMath::kBf16);
  EXPECT_EQ(ClassifyKernelMath("volta_scudnn_128x64_relu_interior_nn_v1"), KernelMath::kFp32);
  EXPECT_EQ(ClassifyKernelMath("void at::native::vectorized_elementwise_kernel<4, float>"),
            KernelMath::kNone);
}

// ---------------------------------------------------------------------------
// The real captures.

struct Capture {
  std::string label;  // "agent_suite/h100/resnet50_b16_fp32"
  std::string path;
  bool kineto;
  // The case's precision, from its name: "fp32" (PyTorch's defaults),
  // "tf32" (TF32 matmuls too), "bf16" or "fp16" (autocast).
  std::string precision;
  bool autocast() const { return precision == "bf16" || precision == "fp16"; }
};

void PrintTo(const Capture& c, std::ostream* os) { *os << c.label; }

std::vector<Capture> ListCaptures() {
  std::vector<Capture> out;
  auto add_dir = [&](const std::string& sub, const std::string& suffix, bool kineto) {
    std::error_code ec;
    const fs::path root = fs::path(kDir) / sub;
    if (!fs::is_directory(root, ec)) return;
    for (const auto& gpu : fs::directory_iterator(root)) {
      if (!gpu.is_directory()) continue;
      for (const auto& file : fs::directory_iterator(gpu.path())) {
        const std::string name = file.path().filename().string();
        if (!absl::EndsWith(name, suffix)) continue;
        const std::string stem = name.substr(0, name.size() - suffix.size());
        std::string precision = "fp32";
        for (const char* p : {"bf16", "fp16", "tf32"}) {
          if (absl::EndsWith(stem, absl::StrCat("_", p))) precision = p;
        }
        out.push_back({sub + "/" + gpu.path().filename().string() + "/" + stem,
                       file.path().string(), kineto, precision});
      }
    }
  };
  add_dir("agent", ".trace.gz", false);
  add_dir("agent_suite", ".trace.gz", false);
  add_dir("kineto", ".json.gz", true);
  std::sort(out.begin(), out.end(),
            [](const Capture& a, const Capture& b) { return a.label < b.label; });
  return out;
}

const Trace& LoadCapture(const Capture& c) {
  static auto* cache = new std::map<std::string, Trace>();
  auto it = cache->find(c.path);
  if (it != cache->end()) return it->second;
  Trace t;
  auto bytes = ReadFile(c.path);  // inflates gzip
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (bytes.ok()) {
    if (c.kineto) {
      KinetoImportOptions options;
      options.batch_size = 1;
      options.precision = c.precision == "bf16" ? v1::PRECISION_AMP_BF16 : v1::PRECISION_FP32;
      auto imported = ImportKinetoTrace(*bytes, options);
      EXPECT_TRUE(imported.ok()) << imported.status();
      if (imported.ok()) t = *std::move(imported);
    } else {
      EXPECT_TRUE(t.ParseFromString(*bytes)) << c.path;
    }
  }
  return cache->emplace(c.path, std::move(t)).first->second;
}

absl::string_view Bare(absl::string_view name) {
  absl::ConsumePrefix(&name, "aten::");
  return name;
}

bool IsCudnnFamily(const Operation& op) {
  const absl::string_view n = Bare(op.name());
  return absl::StrContains(n, "conv") || absl::StrContains(n, "Convolution") || n == "lstm" ||
         n == "gru" || absl::StartsWith(n, "CudnnRnn");
}

bool IsRnn(const Operation& op) {
  const absl::string_view n = Bare(op.name());
  return n == "lstm" || n == "gru" || absl::StartsWith(n, "CudnnRnn");
}

bool IsMatmulFamily(const Operation& op) {
  const absl::string_view n = Bare(op.name());
  return n == "linear" || n == "addmm" || n == "mm" || n == "matmul" || n == "bmm" ||
         n == "baddbmm";
}

bool PassHas(const v1::Pass& pass, KernelMath math) {
  for (const Kernel& k : pass.kernels()) {
    if (ClassifyKernelMath(k.name()) == math) return true;
  }
  return false;
}

// Whether the op ran kernels whose names say which mode they ran in.
bool HasMathKernels(const Operation& op) {
  for (const v1::Pass* p : {&op.forward(), &op.backward()}) {
    for (const Kernel& k : p->kernels()) {
      const KernelMath m = ClassifyKernelMath(k.name());
      if (m != KernelMath::kNone && m != KernelMath::kHalf) return true;
    }
  }
  return false;
}

class CaptureTest : public ::testing::TestWithParam<Capture> {
 protected:
  const Trace& trace() const { return LoadCapture(GetParam()); }
};

TEST(CapturesTest, AreCommitted) {
  const auto captures = ListCaptures();
  EXPECT_GE(
      std::count_if(captures.begin(), captures.end(), [](const Capture& c) { return c.kineto; }),
      50);
  EXPECT_GE(
      std::count_if(captures.begin(), captures.end(), [](const Capture& c) { return !c.kineto; }),
      100);
}

// Except in the tf32 cases the captures ran with cuBLAS TF32 off: no fp32
// matmul ran a TF32 kernel, and only convolutions and cuDNN's LSTM did;
// captures without autocast ran no half kernel at all.
TEST_P(CaptureTest, KernelNamesAgreeWithTheRecordedSettings) {
  for (const Operation& op : trace().operations()) {
    for (const v1::Pass* p : {&op.forward(), &op.backward()}) {
      for (const Kernel& k : p->kernels()) {
        const KernelMath m = ClassifyKernelMath(k.name());
        if (m == KernelMath::kTf32 && GetParam().precision != "tf32") {
          EXPECT_TRUE(IsCudnnFamily(op)) << op.name() << ": " << k.name();
        }
        if (!GetParam().autocast()) {
          EXPECT_TRUE(m == KernelMath::kNone || m == KernelMath::kFp32 || m == KernelMath::kTf32)
              << op.name() << ": " << k.name();
        }
      }
    }
  }
}

TEST_P(CaptureTest, EveryKernelVaryingOpGetsTheModeItsCaptureRan) {
  int ops = 0, tf32_convs = 0, fp32_convs = 0;
  for (const Operation& op : trace().operations()) {
    if (ClassifyOperation(op.name()) != OpKind::kKernelVarying) continue;
    ++ops;
    const bool cudnn = IsCudnnFamily(op);
    const OpMathMode m = InferOpMathMode(trace(), op, cudnn);
    SCOPED_TRACE(op.name() + " -> " + std::string(MathModeName(m.mode)) + " (" + m.evidence + ")");
    if (HasMathKernels(op)) {
      EXPECT_EQ(m.evidence, kEvidenceKernelNames);
    }
    if (GetParam().autocast()) {
      // Autocast casts cuDNN RNNs to fp16 whatever its dtype.
      const MathMode dtype = GetParam().precision == "bf16" ? MathMode::kBf16 : MathMode::kFp16;
      EXPECT_EQ(m.mode, IsRnn(op) ? MathMode::kFp16 : dtype);
      continue;
    }
    if (IsMatmulFamily(op)) {
      EXPECT_EQ(m.mode, GetParam().precision == "tf32" ? MathMode::kTf32 : MathMode::kFp32);
    }
    if (IsRnn(op)) {
      EXPECT_EQ(m.mode, MathMode::kTf32);  // cudnn.allow_tf32
    }
    if (!cudnn || IsRnn(op)) {
      EXPECT_TRUE(m.mode == MathMode::kFp32 || m.mode == MathMode::kTf32);
      continue;
    }
    // Convolutions: what their kernels say, forward first.
    const bool fwd_tf32 = PassHas(op.forward(), KernelMath::kTf32);
    const bool fwd_fp32 = PassHas(op.forward(), KernelMath::kFp32);
    if (fwd_tf32 && !fwd_fp32) {
      EXPECT_EQ(m.mode, MathMode::kTf32);
    }
    if (fwd_fp32 && !fwd_tf32) {
      EXPECT_EQ(m.mode, MathMode::kFp32);
    }
    (m.mode == MathMode::kTf32 ? tf32_convs : fp32_convs)++;
  }
  EXPECT_GT(ops, 0);
  const std::string& label = GetParam().label;
  // ResNet-50 and Inception v3: cuDNN picks TF32 engines for almost every
  // convolution; DCGAN's small ones include fp32 FFT/implicit-GEMM engines.
  if (!GetParam().autocast() && absl::StrContains(label, "resnet50")) {
    EXPECT_EQ(fp32_convs, 0);
    EXPECT_EQ(tf32_convs, 53);
  }
  if (!GetParam().autocast() && absl::StrContains(label, "inception_v3")) {
    EXPECT_GT(tf32_convs, 90);
  }
  if (!GetParam().autocast() && absl::StrContains(label, "dcgan")) {
    EXPECT_GT(fp32_convs, 0);
    EXPECT_GT(tf32_convs, 0);
  }
}

// Settings inferred from the kernels, the way the Kineto importer does, on
// the agent's captures (which predate the agent recording them), against
// what the capture script read from torch.
TEST_P(CaptureTest, InferredSettingsMatchTheCapture) {
  if (GetParam().kineto) GTEST_SKIP() << "core/kineto's test checks imported traces";
  Trace bare = trace();
  bare.clear_math();
  const auto math = InferMathSettings(bare);
  ASSERT_TRUE(math.has_value());
  EXPECT_EQ(math->source(), "inferred");
  ASSERT_TRUE(math->has_autocast_dtype());
  EXPECT_EQ(math->autocast_dtype(), GetParam().autocast() ? GetParam().precision : "");
  if (math->has_matmul_tf32()) {
    const bool tf32 = GetParam().precision == "tf32";
    EXPECT_EQ(math->matmul_tf32(), tf32);
    EXPECT_EQ(math->float32_matmul_precision(), tf32 ? "high" : "highest");
  }
  if (math->has_cudnn_tf32()) {
    EXPECT_TRUE(math->cudnn_tf32());
  }
  bool convs = false, linears = false;
  for (const Operation& op : bare.operations()) {
    convs = convs || (IsCudnnFamily(op) && HasMathKernels(op));
    linears = linears || (IsMatmulFamily(op) && HasMathKernels(op));
  }
  if (!GetParam().autocast()) {
    EXPECT_EQ(math->has_cudnn_tf32(), convs);
    EXPECT_EQ(math->has_matmul_tf32(), linears);
  }
}

INSTANTIATE_TEST_SUITE_P(Committed, CaptureTest, ::testing::ValuesIn(ListCaptures()),
                         [](const ::testing::TestParamInfo<Capture>& info) {
                           std::string name = info.param.label;
                           std::replace_if(
                               name.begin(), name.end(),
                               [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); },
                               '_');
                           return name;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CaptureTest);

// One bf16 Inception v3 convolution (128 -> 192 channels, 1x7) runs its
// forward on a TF32 engine through fp32 copies of the bf16 tensors and its
// backward on bf16 kernels: it is a bf16 operation.
TEST(CaptureRuleTest, HalfKernelsWinOverTf32InTheSameOp) {
  const Trace& t =
      LoadCapture({"", kDir + "/agent_suite/h100/inception_v3_b16_bf16.trace.gz", false, "bf16"});
  int seen = 0;
  for (const Operation& op : t.operations()) {
    if (op.name() != "aten::conv2d" || !PassHas(op.forward(), KernelMath::kTf32)) continue;
    ++seen;
    EXPECT_FALSE(PassHas(op.forward(), KernelMath::kBf16));
    EXPECT_TRUE(PassHas(op.backward(), KernelMath::kBf16));
    const OpMathMode m = InferOpMathMode(t, op, true);
    EXPECT_EQ(m.mode, MathMode::kBf16);
    EXPECT_EQ(m.evidence, kEvidenceKernelNames);
  }
  EXPECT_GT(seen, 0);
}

// The predictor calls the rule per operation; it must stay cheap.
TEST(CaptureRuleTest, CostPerTrace) {
  const Trace& t =
      LoadCapture({"", kDir + "/agent_suite/h100/resnet50_b64_fp32.trace.gz", false, "fp32"});
  const auto start = std::chrono::steady_clock::now();
  int varying = 0;
  for (const Operation& op : t.operations()) {
    if (ClassifyOperation(op.name()) != OpKind::kKernelVarying) continue;
    ++varying;
    InferOpMathMode(t, op, IsCudnnFamily(op));
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("InferOpMathMode: %d kernel-varying ops of ResNet-50 in %.2f ms\n", varying, ms);
  EXPECT_LT(ms, 50.0);
}

// ---------------------------------------------------------------------------
// Rule edge cases (synthetic: no capture has these).

Operation Op(const std::string& name, std::vector<std::string> dtypes,
             std::vector<std::string> forward_kernels,
             std::vector<std::string> backward_kernels = {}) {
  Operation op;
  op.set_name(name);
  for (const std::string& d : dtypes) op.add_arguments()->mutable_tensor()->set_dtype(d);
  for (const std::string& k : forward_kernels) {
    Kernel* kernel = op.mutable_forward()->add_kernels();
    kernel->set_name(k);
    kernel->set_duration_ns(1000);
  }
  for (const std::string& k : backward_kernels) {
    Kernel* kernel = op.mutable_backward()->add_kernels();
    kernel->set_name(k);
    kernel->set_duration_ns(1000);
  }
  return op;
}

void ExpectMode(const Trace& t, const Operation& op, bool cudnn, MathMode mode,
                absl::string_view evidence) {
  const OpMathMode m = InferOpMathMode(t, op, cudnn);
  EXPECT_EQ(MathModeName(m.mode), MathModeName(mode)) << op.name();
  EXPECT_EQ(m.evidence, evidence) << op.name();
}

constexpr char kSimt[] = "cutlass_80_simt_sgemm_128x32_8x5_nn_align1";
constexpr char kTf32Gemm[] = "cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4";
constexpr char kBf16Gemm[] = "nvjet_sm90_tst_128x128_64x6_4x2_h_bz_NNT";
constexpr char kHalfSdpa[] = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7";

TEST(MathModeRuleTest, PyTorchDefaultsWhenNothingTells) {
  Trace t;
  ExpectMode(t, Op("aten::linear", {"float", "float"}, {}), false, MathMode::kFp32,
             kEvidencePyTorchDefaults);
  ExpectMode(t, Op("aten::conv2d", {"float", "float"}, {}), true, MathMode::kTf32,
             kEvidencePyTorchDefaults);
  t.set_precision(v1::PRECISION_FP32);  // says nothing about TF32
  ExpectMode(t, Op("aten::conv2d", {}, {}), true, MathMode::kTf32, kEvidencePyTorchDefaults);
}

TEST(MathModeRuleTest, KernelNamesComeFirstForwardThenBackward) {
  Trace t;
  t.mutable_math()->set_matmul_tf32(true);  // kernels overrule settings
  t.mutable_math()->set_source("recorded");
  ExpectMode(t, Op("aten::linear", {"float"}, {kSimt}, {kTf32Gemm}), false, MathMode::kFp32,
             kEvidenceKernelNames);
  ExpectMode(t, Op("aten::linear", {"float"}, {"elementwise"}, {kTf32Gemm}), false, MathMode::kTf32,
             kEvidenceKernelNames);
  // Half kernels anywhere in the op decide.
  ExpectMode(t, Op("aten::conv2d", {"c10::BFloat16"}, {kTf32Gemm}, {kBf16Gemm}), true,
             MathMode::kBf16, kEvidenceKernelNames);
}

TEST(MathModeRuleTest, APassCanSayItsOwnMode) {
  // The ViT patch convolution: CUDA cores forward, TF32 weight gradient.
  const Operation conv = Op("aten::conv2d", {"float"},
                            {"sm80_xmma_fprop_implicit_gemm_indexed_f32f32_f32f32_f32_nchw"},
                            {"elementwise", kTf32Gemm});
  EXPECT_EQ(PassKernelMathMode(conv.forward()), MathMode::kFp32);
  EXPECT_EQ(PassKernelMathMode(conv.backward()), MathMode::kTf32);
  EXPECT_EQ(PassKernelMathMode(Op("aten::mm", {}, {kSimt, kBf16Gemm}).forward()), MathMode::kBf16);
  EXPECT_EQ(PassKernelMathMode(Op("aten::mm", {}, {"elementwise"}).forward()), std::nullopt);
  // cuDNN's f16 says neither half type.
  EXPECT_EQ(PassKernelMathMode(Op("aten::sdpa", {}, {kHalfSdpa}).forward()), std::nullopt);
}

TEST(MathModeRuleTest, AmbiguousHalfKernelsTakeTheDtypeFromContext) {
  Trace t;
  ExpectMode(t, Op("aten::scaled_dot_product_attention", {"c10::BFloat16"}, {kHalfSdpa}), false,
             MathMode::kBf16, kEvidenceTensorDtypes);
  ExpectMode(t, Op("aten::scaled_dot_product_attention", {}, {kHalfSdpa}), false, MathMode::kFp16,
             kEvidenceKernelNames);
  t.set_precision(v1::PRECISION_AMP_BF16);
  ExpectMode(t, Op("aten::scaled_dot_product_attention", {"float"}, {kHalfSdpa}), false,
             MathMode::kBf16, kEvidenceRecordedSettings);
}

TEST(MathModeRuleTest, AutocastCastsKernelVaryingOpsAndRnnsToFp16) {
  Trace t;
  t.mutable_math()->set_autocast_dtype("bf16");
  t.mutable_math()->set_source("recorded");
  ExpectMode(t, Op("aten::linear", {"float", "float"}, {}), false, MathMode::kBf16,
             kEvidenceRecordedSettings);
  // Autocast recasts fp16 activations too (GNMT's linear after its LSTM).
  ExpectMode(t, Op("aten::linear", {"c10::Half", "float"}, {}), false, MathMode::kBf16,
             kEvidenceRecordedSettings);
  ExpectMode(t, Op("aten::lstm", {"float"}, {}), true, MathMode::kFp16, kEvidenceRecordedSettings);
  // Not cast by autocast: dtypes decide.
  ExpectMode(t, Op("aten::add", {"c10::Half"}, {}), false, MathMode::kFp16, kEvidenceTensorDtypes);
  // Recorded "no autocast" overrides the trace's precision label.
  t.mutable_math()->set_autocast_dtype("");
  t.set_precision(v1::PRECISION_AMP_FP16);
  ExpectMode(t, Op("aten::linear", {"float"}, {}), false, MathMode::kFp32,
             kEvidencePyTorchDefaults);
  t.mutable_math()->clear_autocast_dtype();
  ExpectMode(t, Op("aten::linear", {"float"}, {}), false, MathMode::kFp16,
             kEvidenceRecordedSettings);
}

TEST(MathModeRuleTest, SettingsPickTheFamilysTf32Switch) {
  Trace t;
  v1::MathSettings* m = t.mutable_math();
  m->set_matmul_tf32(true);
  m->set_cudnn_tf32(false);
  m->set_source("recorded");
  ExpectMode(t, Op("aten::bmm", {"float"}, {}), false, MathMode::kTf32, kEvidenceRecordedSettings);
  ExpectMode(t, Op("aten::conv2d", {"float"}, {}), true, MathMode::kFp32,
             kEvidenceRecordedSettings);
  m->set_source("inferred");
  m->clear_cudnn_tf32();  // no evidence: PyTorch's default
  ExpectMode(t, Op("aten::bmm", {"float"}, {}), false, MathMode::kTf32, kEvidenceInferredSettings);
  ExpectMode(t, Op("aten::conv2d", {"float"}, {}), true, MathMode::kTf32, kEvidencePyTorchDefaults);
  m->clear_matmul_tf32();
  m->set_float32_matmul_precision("medium");
  ExpectMode(t, Op("aten::mm", {"float"}, {}), false, MathMode::kTf32, kEvidenceInferredSettings);
  t.clear_math();
  t.set_precision(v1::PRECISION_TF32);
  ExpectMode(t, Op("aten::mm", {"float"}, {}), false, MathMode::kTf32, kEvidenceRecordedSettings);
  t.set_precision(v1::PRECISION_BF16);  // a bf16 model, no dtypes recorded
  ExpectMode(t, Op("aten::mm", {}, {}), false, MathMode::kBf16, kEvidenceRecordedSettings);
}

TEST(MathModeRuleTest, InferredSettingsNeedEvidence) {
  Trace t;
  EXPECT_FALSE(InferMathSettings(t).has_value());
  *t.add_operations() = Op("aten::relu", {"float"}, {"elementwise"});
  EXPECT_FALSE(InferMathSettings(t).has_value());
  *t.add_operations() = Op("aten::linear", {}, {kTf32Gemm});  // no dtypes
  auto m = InferMathSettings(t);
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->matmul_tf32());
  EXPECT_EQ(m->float32_matmul_precision(), "high");
  EXPECT_FALSE(m->has_cudnn_tf32());
  EXPECT_FALSE(m->has_autocast_dtype());
  // A bf16 model (not autocast): bf16 kernels on bf16 inputs tell nothing.
  Trace model;
  *model.add_operations() = Op("aten::linear", {"c10::BFloat16", "c10::BFloat16"}, {kBf16Gemm});
  EXPECT_FALSE(InferMathSettings(model).has_value());
  *model.add_operations() = Op("aten::linear", {"c10::BFloat16", "float"}, {kBf16Gemm});
  m = InferMathSettings(model);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->autocast_dtype(), "bf16");
}

}  // namespace
}  // namespace habitat
