// Work, rooflines, floors and features checked by hand on simple
// configurations and on ones from the real traces (ResNet-50's first conv,
// DCGAN's first transposed conv, GNMT's LSTM, the Transformer's attention);
// kernel_varying_model_test.cc checks every feature against the training
// side's own numbers.
#include "core/kernel_varying/features.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/devices/device_database.h"
#include "core/testing/op_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace kernel_varying {
namespace {

using ::testing::HasSubstr;
using testing::OpConfigOf;

const DeviceDatabase& Devices() {
  static const DeviceDatabase* db = [] {
    auto loaded = DeviceDatabase::LoadFromFile(HABITAT_DATA_DIR "/devices.textproto");
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return new DeviceDatabase(*std::move(loaded));
  }();
  return *db;
}

const habitat::v1::DeviceSpec& Gpu(const char* id) {
  const habitat::v1::DeviceSpec* spec = Devices().Find(id);
  EXPECT_NE(spec, nullptr) << id;
  static const habitat::v1::DeviceSpec empty;
  return spec != nullptr ? *spec : empty;
}

// One row's features by name.
class Row {
 public:
  explicit Row(std::vector<float> x) : x_(std::move(x)) {}
  float operator[](const char* name) const {
    const auto& names = FeatureNames();
    const size_t i = std::find(names.begin(), names.end(), name) - names.begin();
    EXPECT_LT(i, x_.size()) << name;
    return i < x_.size() ? x_[i] : std::numeric_limits<float>::quiet_NaN();
  }

 private:
  std::vector<float> x_;
};

struct Computed {
  Row row;
  double ratio;
};

Computed Features(Family family, const OpConfig& c, MathMode origin_mode, MathMode target_mode,
                  bool backward, const char* origin, const char* target, double origin_ns) {
  std::vector<float> out;
  double ratio = 0;
  const absl::Status s = AppendFeatures(family, c, origin_mode, target_mode, backward, Gpu(origin),
                                        Gpu(target), origin_ns, &out, &ratio);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(out.size(), s.ok() ? kFeatureCount : 0);
  return {Row(std::move(out)), ratio};
}

float F(double v) { return static_cast<float>(v); }

TEST(FeatureNamesTest, MatchTheSpecOrder) {
  const auto& names = FeatureNames();
  ASSERT_EQ(names.size(), kFeatureCount);
  EXPECT_EQ(names[0], "family_linear");
  EXPECT_EQ(names[5], "family_sdpa");
  EXPECT_EQ(names[6], "backward");
  EXPECT_EQ(names[7], "origin_mode_fp32");
  EXPECT_EQ(names[8], "origin_mode_tf32");
  EXPECT_EQ(names[10], "origin_mode_bf16");
  EXPECT_EQ(names[11], "target_mode_fp32");
  EXPECT_EQ(names[15], "log2p_batch");
  EXPECT_EQ(names[18], "log2p_reduction");
  EXPECT_EQ(names[19], "origin_log2_compute_over_memory");
  EXPECT_EQ(names[22], "origin_log2_waves_64");
  EXPECT_EQ(names[25], "origin_log2_bytes_over_l2");
  EXPECT_EQ(names[26], "target_log2_compute_over_memory");
  EXPECT_EQ(names[32], "target_log2_bytes_over_l2");
  EXPECT_EQ(names[33], "log2_origin_over_roofline");
  EXPECT_EQ(names[34], "log2_roofline_ratio");
}

TEST(MathModeTest, NamesRoundTrip) {
  for (MathMode mode : kAllMathModes) {
    auto parsed = ParseMathMode(MathModeName(mode));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, mode);
  }
  EXPECT_THAT(ParseMathMode("fp8").status().message(),
              HasSubstr("unknown math mode \"fp8\" (known: fp32, tf32, fp16, bf16)"));
}

TEST(ComputeWorkTest, LinearByHand) {
  // One row of models/data/H100-SXM.csv.gz: linear m=2 n=3584 k=542.
  const OpConfig c = OpConfigOf({{kM, 2}, {kN, 3584}, {kK, 542}, {kBias, 1}});
  auto w = ComputeWork(Family::kLinear, c, MathMode::kFp32, false);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->flop, 2.0 * 2 * 3584 * 542);
  EXPECT_EQ(w->bytes, 4.0 * (2 * 542 + 542 * 3584 + 2 * 3584));
  // TF32 moves fp32 words; bf16 and fp16 half of them.
  EXPECT_EQ(ComputeWork(Family::kLinear, c, MathMode::kTf32, false)->bytes, w->bytes);
  auto back = ComputeWork(Family::kLinear, c, MathMode::kBf16, true);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->flop, 2 * w->flop);
  EXPECT_EQ(back->bytes, w->bytes);  // twice the words, half the element size
  EXPECT_EQ(ComputeWork(Family::kLinear, c, MathMode::kFp16, false)->bytes, w->bytes / 2);
}

TEST(ComputeWorkTest, ResNet50FirstConvByHand) {
  const OpConfig c = OpConfigOf(
      {{kB, 16}, {kCIn, 3}, {kCOut, 64}, {kKernel, 7}, {kStride, 2}, {kPadding, 3}, {kSize, 224}});
  auto w = ComputeWork(Family::kConv2d, c, MathMode::kTf32, false);
  ASSERT_TRUE(w.ok()) << w.status();
  // Output 112x112 ((224 + 6 - 7) // 2 + 1).
  EXPECT_EQ(w->flop, 2.0 * 16 * 64 * 112 * 112 * 3 * 7 * 7);
  EXPECT_EQ(w->bytes, 4.0 * (16 * 3 * 224 * 224 + 16 * 64 * 112 * 112 + 3 * 64 * 49));
  auto gemm = GemmView(Family::kConv2d, c);
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ(gemm->batch, 1);
  EXPECT_EQ(gemm->rows, 16 * 112 * 112);
  EXPECT_EQ(gemm->cols, 64);
  EXPECT_EQ(gemm->reduction, 3 * 7 * 7);
}

TEST(ComputeWorkTest, ConvOutputFloorsLikePython) {
  // (3 + 0 - 7) // 2 + 1 = -1 in Python (C++ division would give 0); both
  // clamp to 1, so the flop count has one output pixel.
  const OpConfig c =
      OpConfigOf({{kB, 1}, {kCIn, 8}, {kCOut, 8}, {kKernel, 7}, {kStride, 2}, {kSize, 3}});
  auto w = ComputeWork(Family::kConv2d, c, MathMode::kFp32, false);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->flop, 2.0 * 8 * 8 * 49);
  EXPECT_EQ(GemmView(Family::kConv2d, c)->rows, 1);
}

TEST(ComputeWorkTest, DcganFirstTransposedConvByHand) {
  const OpConfig c =
      OpConfigOf({{kB, 64}, {kCIn, 100}, {kCOut, 512}, {kKernel, 4}, {kStride, 1}, {kSize, 1}});
  auto w = ComputeWork(Family::kConvTranspose2d, c, MathMode::kFp32, false);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->flop, 2.0 * 64 * 100 * 512 * 16);
  // Output 4x4: (1 - 1) * 1 - 0 + 4.
  EXPECT_EQ(w->bytes, 4.0 * (64 * 100 + 64 * 512 * 16 + 100 * 512 * 16));
  auto gemm = GemmView(Family::kConvTranspose2d, c);
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ(gemm->rows, 64);  // b * size * size: the input pixels
  EXPECT_EQ(gemm->cols, 512);
  EXPECT_EQ(gemm->reduction, 100 * 16);
}

TEST(ComputeWorkTest, GnmtLstmByHand) {
  const OpConfig c =
      OpConfigOf({{kB, 32}, {kSeq, 50}, {kK, 1024}, {kN, 1024}, {kLayers, 1}, {kBias, 1}});
  auto w = ComputeWork(Family::kLstm, c, MathMode::kFp32, false);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->flop, 50.0 * 8 * 32 * 1024 * 2048);
  EXPECT_EQ(w->bytes, 4.0 * (50 * 32 * (1024 + 4096) + 4096.0 * 2048));
  // Two layers: the second's input is the first's hidden state.
  OpConfig two = c;
  two[kLayers] = 2;
  auto w2 = ComputeWork(Family::kLstm, two, MathMode::kFp32, false);
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ(w2->flop, 50.0 * 8 * 32 * 1024 * (2048 + 2048));
  auto gemm = GemmView(Family::kLstm, two);
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ(gemm->batch, 100);  // layers * seq steps
  EXPECT_EQ(gemm->rows, 32);
  EXPECT_EQ(gemm->cols, 4096);
  EXPECT_EQ(gemm->reduction, 2048);
}

TEST(ComputeWorkTest, TransformerCausalAttentionByHand) {
  const OpConfig c = OpConfigOf({{kB, 32}, {kHeads, 8}, {kSeq, 50}, {kHeadDim, 64}, {kCausal, 1}});
  auto w = ComputeWork(Family::kSdpa, c, MathMode::kBf16, false);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->flop, 4.0 * 32 * 8 * 50 * 50 * 64 / 2);
  EXPECT_EQ(w->bytes, 2.0 * 4 * 32 * 8 * 50 * 64);
  auto gemm = GemmView(Family::kSdpa, c);
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ(gemm->batch, 256);
  EXPECT_EQ(gemm->rows, 50);
  EXPECT_EQ(gemm->cols, 50);
  EXPECT_EQ(gemm->reduction, 64);
}

TEST(ComputeWorkTest, RejectsNegativeColumnsAndZeroStride) {
  auto negative = ComputeWork(Family::kLinear, OpConfigOf({{kM, -1}, {kN, 8}, {kK, 8}}),
                              MathMode::kFp32, false);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(), HasSubstr("column m is negative"));
  const OpConfig zero_stride =
      OpConfigOf({{kB, 1}, {kCIn, 3}, {kCOut, 8}, {kKernel, 3}, {kSize, 8}});
  EXPECT_THAT(ComputeWork(Family::kConv2d, zero_stride, MathMode::kFp32, false).status().message(),
              HasSubstr("stride must be at least 1"));
  EXPECT_THAT(GemmView(Family::kConv2d, zero_stride).status().message(),
              HasSubstr("stride must be at least 1"));
}

TEST(MinArithmeticFlopTest, WinogradAndFftOnlyForStrideOneConvolutions) {
  const OpConfig k3 = OpConfigOf({{kB, 8}, {kCIn, 64}, {kCOut, 64}, {kKernel, 3}, {kStride, 1}});
  EXPECT_EQ(MinArithmeticFlop(Family::kConv2d, k3, 1000.0), 250.0);
  EXPECT_EQ(MinArithmeticFlop(Family::kConvTranspose2d, k3, 1000.0), 250.0);
  OpConfig k7 = k3;
  k7[kKernel] = 7;
  EXPECT_EQ(MinArithmeticFlop(Family::kConv2d, k7, 1000.0), 1000.0 / 24.5);
  OpConfig k1 = k3;
  k1[kKernel] = 1;
  EXPECT_EQ(MinArithmeticFlop(Family::kConv2d, k1, 1000.0), 1000.0);
  OpConfig strided = k3;
  strided[kStride] = 2;
  EXPECT_EQ(MinArithmeticFlop(Family::kConv2d, strided, 1000.0), 1000.0);
  EXPECT_EQ(
      MinArithmeticFlop(Family::kLinear, OpConfigOf({{kM, 3}, {kStride, 1}, {kKernel, 3}}), 1000.0),
      1000.0);
}

// A 4096^3 fp32 GEMM: compute-bound everywhere.
const OpConfig kSquare = OpConfigOf({{kM, 4096}, {kN, 4096}, {kK, 4096}});
constexpr double kSquareFlop = 2.0 * 4096 * 4096 * 4096;
constexpr double kSquareBytes = 4.0 * 3 * 4096 * 4096;

TEST(FloorNsTest, SquareGemmOnH100ByHand) {
  auto floor = FloorNs(Family::kLinear, kSquare, MathMode::kFp32, false, Gpu("H100-SXM"));
  ASSERT_TRUE(floor.ok()) << floor.status();
  // The datasheet peak (67 TFLOP/s), not the sustained 51.81: the floor is a
  // hard limit. Memory would allow 201 MB / 3350 GB/s = 60 us.
  EXPECT_EQ(*floor, kSquareFlop / 67e3);
  auto backward = FloorNs(Family::kLinear, kSquare, MathMode::kFp32, true, Gpu("H100-SXM"));
  EXPECT_EQ(*backward, 2 * kSquareFlop / 67e3);
  // Memory-bound: a 1-row GEMM reads the whole weight.
  const OpConfig row = OpConfigOf({{kM, 1}, {kN, 4096}, {kK, 4096}});
  auto gemv = FloorNs(Family::kLinear, row, MathMode::kBf16, false, Gpu("H100-SXM"));
  EXPECT_EQ(*gemv, 2.0 * (4096 + 4096.0 * 4096 + 4096) / 3350);
  // No units of the mode: no floor (callers pass TargetMathMode's mode).
  EXPECT_EQ(*FloorNs(Family::kLinear, kSquare, MathMode::kTf32, false, Gpu("V100-PCIE-32GB")), 0);
  // Winograd: a stride-1 3x3 convolution may need a quarter of the
  // multiplies (60 us at the TF32 peak; its 112 MB take 33 us).
  const OpConfig conv = OpConfigOf({{kB, 32},
                                    {kCIn, 512},
                                    {kCOut, 512},
                                    {kKernel, 3},
                                    {kStride, 1},
                                    {kPadding, 1},
                                    {kSize, 28}});
  const double conv_flop = 2.0 * 32 * 512 * 28 * 28 * 512 * 9;
  EXPECT_DOUBLE_EQ(*FloorNs(Family::kConv2d, conv, MathMode::kTf32, false, Gpu("H100-SXM")),
                   conv_flop / 4 / 494.7e3);
}

// A convolution on tensor cores is an implicit GEMM: VGG-19's 28x28
// 512->512 3x3 layer at batch 384 in fp16 passes the large-GEMM test on
// the RTX 3090 (1.4 TFLOP, about 19 ms at its sustained 75.64 TFLOP/s
// against 1.2 ms of traffic); in fp32 it does not (that rule is for linear
// and bmm only), nor does its memory-bound first layer.
TEST(LargeTensorCoreGemmTest, ConvolutionsAreImplicitGemms) {
  const OpConfig vgg = OpConfigOf({{kB, 384},
                                   {kCIn, 512},
                                   {kCOut, 512},
                                   {kKernel, 3},
                                   {kStride, 1},
                                   {kPadding, 1},
                                   {kSize, 28}});
  const double flop = 2.0 * 384 * 28 * 28 * 512 * 512 * 9;
  auto fp16 =
      LargeTensorCoreGemmRooflineNs(Family::kConv2d, vgg, MathMode::kFp16, false, Gpu("RTX3090"));
  ASSERT_TRUE(fp16.ok()) << fp16.status();
  EXPECT_DOUBLE_EQ(*fp16, flop / 75.64e3);
  EXPECT_EQ(*LargeGemmRooflineNs(Family::kConv2d, vgg, MathMode::kFp32, false, Gpu("RTX3090")), 0);
  // The first layer (3 input channels) is bound by its 2.5 GB of output.
  const OpConfig first = OpConfigOf(
      {{kB, 384}, {kCIn, 3}, {kCOut, 64}, {kKernel, 3}, {kStride, 1}, {kPadding, 1}, {kSize, 224}});
  EXPECT_EQ(*LargeTensorCoreGemmRooflineNs(Family::kConv2d, first, MathMode::kFp16, false,
                                           Gpu("RTX3090")),
            0);
}

TEST(FeaturesTest, SquareGemmOnH100ToItselfByHand) {
  const Computed c = Features(Family::kLinear, kSquare, MathMode::kFp32, MathMode::kFp32, false,
                              "H100-SXM", "H100-SXM", 3e6);
  const Row& x = c.row;
  const double compute = kSquareFlop / 51.81e3;  // sustained fp32, ns
  const double memory = kSquareBytes / 3041.1;   // streaming bandwidth, ns
  EXPECT_EQ(x["family_linear"], 1.0f);
  EXPECT_EQ(x["family_bmm"], 0.0f);
  EXPECT_EQ(x["backward"], 0.0f);
  EXPECT_EQ(x["origin_mode_fp32"], 1.0f);
  EXPECT_EQ(x["origin_mode_tf32"], 0.0f);
  EXPECT_EQ(x["target_mode_fp32"], 1.0f);
  EXPECT_EQ(x["log2p_batch"], 1.0f);
  EXPECT_EQ(x["log2p_rows"], F(std::log2(4097.0)));
  EXPECT_EQ(x["log2p_reduction"], F(std::log2(4097.0)));
  EXPECT_FLOAT_EQ(x["origin_log2_compute_over_memory"], F(std::log2(compute / memory)));
  // 32 x 32 tiles of 128 on 132 SMs: 7.76 waves, the last 97% full.
  EXPECT_FLOAT_EQ(x["origin_log2_waves_128"], F(std::log2(1024.0 / 132)));
  EXPECT_FLOAT_EQ(x["origin_wave_quant_128"], F(1024.0 / 132 / 8));
  EXPECT_FLOAT_EQ(x["origin_log2_waves_64"], F(std::log2(4096.0 / 132)));
  EXPECT_FLOAT_EQ(x["origin_wave_quant_64"], F(4096.0 / 132 / 32));
  EXPECT_FLOAT_EQ(x["origin_log2_roofline_ns"], F(std::log2(compute)));
  EXPECT_FLOAT_EQ(x["origin_log2_bytes_over_l2"], F(std::log2((kSquareBytes + 1) / 52428800)));
  EXPECT_EQ(x["target_log2_roofline_ns"], x["origin_log2_roofline_ns"]);
  EXPECT_FLOAT_EQ(x["log2_origin_over_roofline"], F(std::log2(3e6 / compute)));
  EXPECT_EQ(x["log2_roofline_ratio"], 0.0f);
  EXPECT_EQ(c.ratio, 1.0);
}

TEST(FeaturesTest, Tf32GemmFromH100ToV100FallsBackToFp32) {
  // The V100 has no TF32: the target runs fp32 CUDA cores, at its sustained
  // fp32 figure (12.85 TFLOP/s, data/devices.textproto).
  const MathMode target = TargetMathMode(MathMode::kTf32, Gpu("V100-PCIE-32GB"));
  ASSERT_EQ(target, MathMode::kFp32);
  const Computed c = Features(Family::kLinear, kSquare, MathMode::kTf32, target, true, "H100-SXM",
                              "V100-PCIE-32GB", 1e6);
  const double origin_roofline = 2 * kSquareFlop / 372.05e3;
  const double target_roofline = 2 * kSquareFlop / 12.85e3;
  EXPECT_DOUBLE_EQ(c.ratio, target_roofline / origin_roofline);
  EXPECT_EQ(c.row["backward"], 1.0f);
  EXPECT_EQ(c.row["origin_mode_tf32"], 1.0f);
  EXPECT_EQ(c.row["target_mode_fp32"], 1.0f);
  EXPECT_EQ(c.row["target_mode_tf32"], 0.0f);
  EXPECT_FLOAT_EQ(c.row["target_log2_waves_128"], F(std::log2(1024.0 / 80)));
  EXPECT_FLOAT_EQ(c.row["target_wave_quant_128"], F(1024.0 / 80 / 13));
  EXPECT_FLOAT_EQ(c.row["log2_roofline_ratio"], F(std::log2(target_roofline / origin_roofline)));
  EXPECT_FLOAT_EQ(c.row["log2_origin_over_roofline"], F(std::log2(1e6 / origin_roofline)));
}

TEST(FeaturesTest, TinyOpsSitOnTheOneNanosecondRoofline) {
  // A 1x1x1 GEMM: compute and memory both below 1 ns, so the roofline is
  // 1 ns on both GPUs, one tile, and origin times below 1 ns count as 1.
  const Computed c =
      Features(Family::kLinear, OpConfigOf({{kM, 1}, {kN, 1}, {kK, 1}}), MathMode::kBf16,
               MathMode::kBf16, false, "H100-SXM", "A100-SXM-80GB", 0.25);
  EXPECT_EQ(c.ratio, 1.0);
  EXPECT_EQ(c.row["origin_log2_roofline_ns"], 0.0f);
  EXPECT_EQ(c.row["log2_origin_over_roofline"], 0.0f);
  EXPECT_FLOAT_EQ(c.row["origin_log2_waves_128"], F(std::log2(1.0 / 132)));
  EXPECT_FLOAT_EQ(c.row["target_wave_quant_64"], F(1.0 / 108));
  // Compute time under 1e-3 ns counts as 1e-3 ns (6 bytes take 0.002 ns).
  EXPECT_FLOAT_EQ(c.row["origin_log2_compute_over_memory"], F(std::log2(1e-3 / (6 / 3041.1))));
}

TEST(FeaturesTest, RejectsBadDevicesModesAndTimes) {
  const OpConfig c = OpConfigOf({{kM, 64}, {kN, 64}, {kK, 64}});
  std::vector<float> out;
  double ratio = -1;
  auto append = [&](MathMode origin_mode, MathMode target_mode, const habitat::v1::DeviceSpec& o,
                    const habitat::v1::DeviceSpec& t, double ns) {
    return AppendFeatures(Family::kLinear, c, origin_mode, target_mode, false, o, t, ns, &out,
                          &ratio);
  };
  habitat::v1::DeviceSpec broken = Gpu("H100-SXM");
  broken.set_l2_cache_bytes(0);
  absl::Status s = append(MathMode::kFp32, MathMode::kFp32, Gpu("H200"), broken, 1e5);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("GPU \"H100-SXM\": l2_cache_bytes is 0"));
  broken = Gpu("H100-SXM");
  broken.set_sm_count(0);
  EXPECT_THAT(append(MathMode::kFp32, MathMode::kFp32, broken, Gpu("H200"), 1e5).message(),
              HasSubstr("sm_count is 0"));
  broken = Gpu("H100-SXM");
  broken.set_streaming_bandwidth_gbps(0);
  broken.set_measured_memory_bandwidth_gbps(0);
  broken.set_memory_bandwidth_gbps(0);
  EXPECT_THAT(append(MathMode::kFp32, MathMode::kFp32, broken, Gpu("H200"), 1e5).message(),
              HasSubstr("measured_memory_bandwidth_gbps and memory_bandwidth_gbps are 0"));
  // TF32 on a V100: the caller should have asked TargetMathMode.
  EXPECT_THAT(append(MathMode::kTf32, MathMode::kTf32, Gpu("H100-SXM"), Gpu("V100-PCIE-32GB"), 1e5)
                  .message(),
              HasSubstr("GPU \"V100-PCIE-32GB\": no sustained tf32 throughput"));
  EXPECT_THAT(
      append(MathMode::kFp32, MathMode::kFp32, Gpu("H200"), Gpu("H200"), std::nan("")).message(),
      HasSubstr("not a finite number"));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(ratio, -1);
  // A good row appends exactly kFeatureCount values.
  ASSERT_TRUE(
      append(MathMode::kFp32, MathMode::kFp32, Gpu("H200"), Gpu("A100-SXM-80GB"), 1e5).ok());
  EXPECT_EQ(out.size(), kFeatureCount);
  EXPECT_GT(ratio, 0);
  // The floor needs the datasheet bandwidth.
  broken = Gpu("H100-SXM");
  broken.set_memory_bandwidth_gbps(0);
  EXPECT_THAT(FloorNs(Family::kLinear, c, MathMode::kFp32, false, broken).status().message(),
              HasSubstr("memory_bandwidth_gbps is 0"));
}

}  // namespace
}  // namespace kernel_varying
}  // namespace habitat
