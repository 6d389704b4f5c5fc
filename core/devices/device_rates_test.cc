// The GPU rates' one owner against the spec database and by hand.
#include "core/devices/device_rates.h"

#include "core/devices/device_database.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

const DeviceDatabase& Devices() {
  static const DeviceDatabase* db = [] {
    auto loaded = DeviceDatabase::LoadFromFile(HABITAT_DATA_DIR "/devices.textproto");
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return new DeviceDatabase(*std::move(loaded));
  }();
  return *db;
}

const v1::DeviceSpec& Gpu(const char* id) {
  const v1::DeviceSpec* spec = Devices().Find(id);
  EXPECT_NE(spec, nullptr) << id;
  static const v1::DeviceSpec empty;
  return spec != nullptr ? *spec : empty;
}

TEST(DeviceThroughputTest, PeakSustainedAndStreaming) {
  const auto& h100 = Gpu("H100-SXM");
  EXPECT_EQ(PeakTflops(h100, MathMode::kFp32), 67);
  EXPECT_EQ(PeakTflops(h100, MathMode::kTf32), 494.7);
  EXPECT_EQ(PeakTflops(h100, MathMode::kBf16), 989.4);
  EXPECT_EQ(SustainedTflops(h100, MathMode::kFp32), 51.81);  // measured
  EXPECT_EQ(SustainedTflops(h100, MathMode::kTf32), 372.05);
  // The H200 has no measured TF32 figure: 0.75 of the datasheet peak.
  EXPECT_EQ(SustainedTflops(Gpu("H200"), MathMode::kTf32), 0.75 * 494.7);
  // No such units: no peak, no sustained throughput.
  EXPECT_EQ(PeakTflops(Gpu("V100-PCIE-32GB"), MathMode::kTf32), 0);
  EXPECT_EQ(SustainedTflops(Gpu("V100-PCIE-32GB"), MathMode::kTf32), 0);
  EXPECT_EQ(SustainedTflops(Gpu("T4"), MathMode::kBf16), 0);
  EXPECT_EQ(SustainedTflops(Gpu("T4"), MathMode::kFp16), 24);
  EXPECT_EQ(StreamingBandwidthGbps(h100), 3041.1);
  // Without a measured streaming bandwidth: the default fraction.
  EXPECT_EQ(StreamingBandwidthGbps(Gpu("L4")), 0.82 * 300);
  EXPECT_TRUE(StreamingBandwidthIsDefault(Gpu("L4")));
  EXPECT_FALSE(StreamingBandwidthIsDefault(h100));
}

TEST(DeviceThroughputTest, StreamingFallsBackToTheMeasuredCopyFirst) {
  v1::DeviceSpec spec;
  spec.set_memory_bandwidth_gbps(1000);
  EXPECT_EQ(StreamingBandwidthGbps(spec), kDefaultStreamingEfficiency * 1000);
  spec.set_measured_memory_bandwidth_gbps(900);
  EXPECT_EQ(StreamingBandwidthGbps(spec), 900);
  EXPECT_TRUE(StreamingBandwidthIsDefault(spec));
  spec.set_streaming_bandwidth_gbps(880);
  EXPECT_EQ(StreamingBandwidthGbps(spec), 880);
  EXPECT_FALSE(StreamingBandwidthIsDefault(spec));
}

TEST(SustainedClockTest, MeasuredClockElseBoost) {
  v1::DeviceSpec spec;
  spec.set_boost_clock_mhz(1695);
  EXPECT_EQ(SustainedClockMhz(spec), 1695);
  spec.set_sustained_clock_mhz(1806);
  EXPECT_EQ(SustainedClockMhz(spec), 1806);
}

TEST(TargetMathModeTest, FallsBackToFp32WithoutTheUnits) {
  EXPECT_EQ(TargetMathMode(MathMode::kTf32, Gpu("A100-SXM-80GB")), MathMode::kTf32);
  EXPECT_EQ(TargetMathMode(MathMode::kTf32, Gpu("V100-PCIE-32GB")), MathMode::kFp32);
  EXPECT_EQ(TargetMathMode(MathMode::kBf16, Gpu("T4")), MathMode::kFp32);
  EXPECT_EQ(TargetMathMode(MathMode::kFp16, Gpu("T4")), MathMode::kFp16);
  EXPECT_EQ(TargetMathMode(MathMode::kFp16, Gpu("P100")), MathMode::kFp32);
  EXPECT_EQ(TargetMathMode(MathMode::kBf16, Gpu("L4")), MathMode::kBf16);
  EXPECT_EQ(TargetMathMode(MathMode::kFp32, Gpu("P4")), MathMode::kFp32);
}

}  // namespace
}  // namespace habitat
