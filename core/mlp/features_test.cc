// Work and features checked by hand on configurations from the real traces
// (ResNet-50's first conv, DCGAN's first transposed conv, GNMT's LSTM, the
// Transformer's attention); mlp_predictor_test.cc checks every feature
// against the training side's own numbers.
#include "core/mlp/features.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/devices/device_database.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace mlp {
namespace {

using ::testing::HasSubstr;

OpConfig Config(std::initializer_list<std::pair<ConfigColumn, int64_t>> values) {
  OpConfig c{};
  for (const auto& [column, value] : values) c[column] = value;
  return c;
}

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

TEST(FeatureNamesTest, MatchTheSpecOrder) {
  const auto& names = FeatureNames();
  ASSERT_EQ(names.size(), kFeatureCount);
  EXPECT_EQ(names[0], "family_linear");
  EXPECT_EQ(names[5], "family_sdpa");
  EXPECT_EQ(names[7], "bf16");
  EXPECT_EQ(names[8], "log2p_b");
  EXPECT_EQ(names[23], "log2p_bias");
  EXPECT_EQ(names[26], "log2_intensity");
  EXPECT_EQ(names[27], "origin_log2_peak_tflops");
  EXPECT_EQ(names[38], "target_compute_capability");
  EXPECT_EQ(names[41], "log2_roofline_ratio");
  EXPECT_EQ(names[46], "log2_origin_ns");
}

TEST(ComputeWorkTest, LinearByHand) {
  // One row of models/data/H100-SXM.csv.gz: linear m=2 n=3584 k=542.
  const OpConfig c = Config({{kM, 2}, {kN, 3584}, {kK, 542}, {kBias, 1}});
  auto w = ComputeWork(Family::kLinear, c, Precision::kFp32, false);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->flop, 2.0 * 2 * 3584 * 542);
  EXPECT_EQ(w->bytes, 4.0 * (2 * 542 + 542 * 3584 + 2 * 3584));
  EXPECT_EQ(w->tiles, 28);  // ceil(2/128) * ceil(3584/128)
  auto back = ComputeWork(Family::kLinear, c, Precision::kBf16, true);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->flop, 2 * w->flop);
  EXPECT_EQ(back->bytes, w->bytes);  // twice the words, half the element size
  EXPECT_EQ(back->tiles, 28);
}

TEST(ComputeWorkTest, ResNet50FirstConvByHand) {
  const OpConfig c = Config(
      {{kB, 16}, {kCIn, 3}, {kCOut, 64}, {kKernel, 7}, {kStride, 2}, {kPadding, 3}, {kSize, 224}});
  auto w = ComputeWork(Family::kConv2d, c, Precision::kFp32, false);
  ASSERT_TRUE(w.ok()) << w.status();
  // Output 112x112 ((224 + 6 - 7) // 2 + 1).
  EXPECT_EQ(w->flop, 2.0 * 16 * 64 * 112 * 112 * 3 * 7 * 7);
  EXPECT_EQ(w->bytes, 4.0 * (16 * 3 * 224 * 224 + 16 * 64 * 112 * 112 + 3 * 64 * 49));
  EXPECT_EQ(w->tiles, 1568);  // ceil(16*112*112 / 128) * ceil(64 / 128)
}

TEST(ComputeWorkTest, ConvOutputFloorsLikePython) {
  // (3 + 0 - 7) // 2 + 1 = -1 in Python (C++ division would give 0); both
  // clamp to 1, so the flop count has one output pixel.
  const OpConfig c =
      Config({{kB, 1}, {kCIn, 8}, {kCOut, 8}, {kKernel, 7}, {kStride, 2}, {kSize, 3}});
  auto w = ComputeWork(Family::kConv2d, c, Precision::kFp32, false);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->flop, 2.0 * 8 * 8 * 49);
}

TEST(ComputeWorkTest, DcganFirstTransposedConvByHand) {
  const OpConfig c =
      Config({{kB, 64}, {kCIn, 100}, {kCOut, 512}, {kKernel, 4}, {kStride, 1}, {kSize, 1}});
  auto w = ComputeWork(Family::kConvTranspose2d, c, Precision::kFp32, false);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->flop, 2.0 * 64 * 100 * 512 * 16);
  // Output 4x4: (1 - 1) * 1 - 0 + 4.
  EXPECT_EQ(w->bytes, 4.0 * (64 * 100 + 64 * 512 * 16 + 100 * 512 * 16));
  EXPECT_EQ(w->tiles, 4);  // ceil(64/128) * ceil(512/128)
}

TEST(ComputeWorkTest, GnmtLstmByHand) {
  const OpConfig c =
      Config({{kB, 32}, {kSeq, 50}, {kK, 1024}, {kN, 1024}, {kLayers, 1}, {kBias, 1}});
  auto w = ComputeWork(Family::kLstm, c, Precision::kFp32, false);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->flop, 50.0 * 8 * 32 * 1024 * 2048);
  EXPECT_EQ(w->bytes, 4.0 * (50 * 32 * (1024 + 4096) + 4096.0 * 2048));
  EXPECT_EQ(w->tiles, 32);  // ceil(32/128) * ceil(4096/128)
  // Two layers: the second's input is the first's hidden state.
  OpConfig two = c;
  two[kLayers] = 2;
  auto w2 = ComputeWork(Family::kLstm, two, Precision::kFp32, false);
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ(w2->flop, 50.0 * 8 * 32 * 1024 * (2048 + 2048));
}

TEST(ComputeWorkTest, TransformerCausalAttentionByHand) {
  const OpConfig c = Config({{kB, 32}, {kHeads, 8}, {kSeq, 50}, {kHeadDim, 64}, {kCausal, 1}});
  auto w = ComputeWork(Family::kSdpa, c, Precision::kBf16, false);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->flop, 4.0 * 32 * 8 * 50 * 50 * 64 / 2);
  EXPECT_EQ(w->bytes, 2.0 * 4 * 32 * 8 * 50 * 64);
  EXPECT_EQ(w->tiles, 256);  // 32 * 8 * ceil(50/128)
}

TEST(ComputeWorkTest, RejectsNegativeColumnsAndZeroStride) {
  auto negative =
      ComputeWork(Family::kLinear, Config({{kM, -1}, {kN, 8}, {kK, 8}}), Precision::kFp32, false);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(), HasSubstr("column m is negative"));
  auto zero_stride = ComputeWork(Family::kConv2d,
                                 Config({{kB, 1}, {kCIn, 3}, {kCOut, 8}, {kKernel, 3}, {kSize, 8}}),
                                 Precision::kFp32, false);
  EXPECT_THAT(zero_stride.status().message(), HasSubstr("stride must be at least 1"));
}

TEST(PeakTflopsTest, PicksTheUnitsTheFamilyRunsOn) {
  const auto& h100 = Gpu("H100-SXM");
  EXPECT_EQ(PeakTflops(h100, Family::kLinear, Precision::kFp32), 67);
  EXPECT_EQ(PeakTflops(h100, Family::kConv2d, Precision::kFp32), 494.7);  // TF32
  EXPECT_EQ(PeakTflops(h100, Family::kLstm, Precision::kFp32), 494.7);
  EXPECT_EQ(PeakTflops(h100, Family::kSdpa, Precision::kBf16), 989.4);
  // T4 has fp16 but no bf16 tensor cores; P100 has neither, nor TF32.
  EXPECT_EQ(PeakTflops(Gpu("T4"), Family::kLinear, Precision::kBf16), 65);
  EXPECT_EQ(PeakTflops(Gpu("P100"), Family::kLinear, Precision::kBf16), 9.3);
  EXPECT_EQ(PeakTflops(Gpu("P100"), Family::kConv2d, Precision::kFp32), 9.3);
}

TEST(FeaturesTest, LinearRowByHand) {
  const OpConfig c = Config({{kM, 2}, {kN, 3584}, {kK, 542}, {kBias, 1}});
  auto x = ComputeFeatures(Family::kLinear, c, Precision::kFp32, false, Gpu("H100-SXM"),
                           Gpu("H200"), 42546);
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_EQ(x->size(), kFeatureCount);
  const auto at = [&](const char* name) {
    const auto& names = FeatureNames();
    const size_t i = std::find(names.begin(), names.end(), name) - names.begin();
    EXPECT_LT(i, kFeatureCount) << name;
    return i < kFeatureCount ? (*x)[i] : std::numeric_limits<float>::quiet_NaN();
  };
  EXPECT_EQ(at("family_linear"), 1.0f);
  EXPECT_EQ(at("family_bmm"), 0.0f);
  EXPECT_EQ(at("backward"), 0.0f);
  EXPECT_EQ(at("bf16"), 0.0f);
  EXPECT_EQ(at("log2p_b"), 0.0f);
  EXPECT_EQ(at("log2p_m"), static_cast<float>(std::log2(3.0)));
  EXPECT_EQ(at("log2p_bias"), 1.0f);
  EXPECT_EQ(at("origin_log2_peak_tflops"), static_cast<float>(std::log2(67.0)));
  EXPECT_EQ(at("origin_log2_sm_count"), static_cast<float>(std::log2(132.0)));
  EXPECT_EQ(at("origin_log2_l2_mib"), static_cast<float>(std::log2(50.0)));
  EXPECT_EQ(at("origin_compute_capability"), 9.0f);
  // Memory-bound on both: 7,803,120 bytes at 3350 GB/s on the H100.
  EXPECT_EQ(at("log2_roofline_origin_ns"), static_cast<float>(std::log2(7803120.0 / 3350)));
  EXPECT_EQ(at("log2_waves_origin"), static_cast<float>(std::log2(28.0 / 132)));
  EXPECT_EQ(at("wave_quant_origin"), static_cast<float>(132.0 / 28));
  EXPECT_EQ(at("log2_origin_ns"), static_cast<float>(std::log2(42546.0)));
}

TEST(FeaturesTest, RejectsBadDevicesAndTimes) {
  const OpConfig c = Config({{kM, 64}, {kN, 64}, {kK, 64}});
  habitat::v1::DeviceSpec broken = Gpu("H100-SXM");
  broken.set_memory_bandwidth_gbps(0);
  std::vector<float> out;
  auto s =
      AppendFeatures(Family::kLinear, c, Precision::kFp32, false, Gpu("H200"), broken, 1e5, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("\"H100-SXM\": memory_bandwidth_gbps"));
  EXPECT_TRUE(out.empty());
  s = AppendFeatures(Family::kLinear, c, Precision::kFp32, false, Gpu("H200"), Gpu("H200"),
                     std::nan(""), &out);
  EXPECT_THAT(s.message(), HasSubstr("not a finite number"));
  EXPECT_TRUE(out.empty());
  // A good row appends exactly kFeatureCount values.
  ASSERT_TRUE(AppendFeatures(Family::kLinear, c, Precision::kFp32, true, Gpu("H200"),
                             Gpu("A100-SXM-80GB"), 1e5, &out)
                  .ok());
  EXPECT_EQ(out.size(), kFeatureCount);
}

}  // namespace
}  // namespace mlp
}  // namespace habitat
