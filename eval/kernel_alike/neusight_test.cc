#include "eval/kernel_alike/neusight.h"

#include <filesystem>
#include <string>

#include "common/file_io.h"
#include "eval/kernel_alike/fit.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace habitat::eval {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

habitat::v1::DeviceDatabase Devices() {
  habitat::v1::DeviceDatabase db;
  auto text = ReadFile(std::string(HABITAT_DATA_DIR) + "/devices.textproto");
  EXPECT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, &db));
  return db;
}

const std::string kHeader =
    "OPName,Latency,Device,Torch Version,CUDNN Version,Kernel Name,Warps per "
    "SM,Blocks per SM,Grid x,Grid y,Grid z,Block x,Block y,Block z,CUDA "
    "Version,B,H\n";

TEST(SplitCsvLineTest, Quoting) {
  auto f = SplitCsvLine(R"(a,"b, c","say ""hi""",,d)");
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(*f, ElementsAre("a", "b, c", "say \"hi\"", "", "d"));
  EXPECT_FALSE(SplitCsvLine(R"(a,"b)").ok());
}

TEST(ParseNeuSightCsvTest, RejectsBadInput) {
  const auto db = Devices();
  std::string id;
  auto r = ParseNeuSightCsv("OPName,Latency\nadd,1\n", "x.csv", db, &id);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("x.csv: no column 'Device'"));

  r = ParseNeuSightCsv(kHeader + "add,0.1,Unknown GPU,p,1,k,1,1,1,1,1,128,1,1,cu,2,3\n", "x.csv",
                       db, &id);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("Unknown GPU"));

  r = ParseNeuSightCsv(kHeader + "add,fast,Tesla P4,p,1,k,1,1,1,1,1,128,1,1,cu,2,3\n", "x.csv", db,
                       &id);
  EXPECT_THAT(r.status().message(), HasSubstr("x.csv:2"));

  r = ParseNeuSightCsv(kHeader + "add,0.1,Tesla P4\n", "x.csv", db, &id);
  EXPECT_THAT(r.status().message(), HasSubstr("3 fields"));
}

TEST(AnalyticDramTrafficTest, PerOperatorKind) {
  // Binary: two 2x3 fp32 inputs read, one written.
  DramTraffic t = AnalyticDramTraffic({"add", 2, 3});
  EXPECT_EQ(t.read_bytes, 48);
  EXPECT_EQ(t.write_bytes, 24);
  t = AnalyticDramTraffic({"relu", 2, 3});
  EXPECT_EQ(t.read_bytes, 24);
  EXPECT_EQ(t.write_bytes, 24);
  // Layer norm: input + gamma + beta read; output + mean + rstd written.
  t = AnalyticDramTraffic({"ln", 2, 3});
  EXPECT_EQ(t.read_bytes, (6 + 6) * 4);
  EXPECT_EQ(t.write_bytes, (6 + 4) * 4);
}

// The real shared data set, where present (it lives beside the repo).
class SharedNeuSightDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(dir + "/ops/add")) GTEST_SKIP() << dir << " not present";
  }
  const std::string dir = HABITAT_NEUSIGHT_DIR;
};

TEST_F(SharedNeuSightDataTest, LoadsAndJoinsTheRealFiles) {
  const auto db = Devices();
  std::vector<std::string> ids;
  auto rows = LoadJoined({dir}, {"add", "ln"}, db, &ids);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(ids, ElementsAre("P4", "P100", "T4", "V100-PCIE-32GB", "A100-PCIE-40GB"));
  // 1750 rows per file for add, one configuration measured twice; ln has
  // 1400 rows and 1397 distinct configurations.
  EXPECT_EQ(rows->size(), 1749u + 1397u);
  bool found = false;
  for (const auto& r : *rows) {
    if (r.config.op == "add" && r.config.b == 127 && r.config.h == 168) {
      const Measurement& m = r.by_device.at("P4");
      EXPECT_NEAR(m.latency_ms, 0.026284800097346305, 1e-12);
      EXPECT_EQ(m.grid[0], 42u);  // ceil(127 * 168 / 512)
      EXPECT_EQ(m.block[0], 128u);
      found = true;
    }
  }
  EXPECT_TRUE(found);

  std::vector<const JoinedRow*> ptrs;
  for (const auto& r : *rows) ptrs.push_back(&r);
  auto fitted = FitConstants(ptrs, ids);
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  // The P4's datasheet bandwidth is 192 GB/s; streaming kernels reach less.
  EXPECT_GT(fitted->at("P4").streaming_bandwidth_gbps, 100);
  EXPECT_LT(fitted->at("P4").streaming_bandwidth_gbps, 192);
}

// NeuSight's older GPUs and our Hopper capture joined on the configurations
// both measured: the production direction (H100 -> older GPUs).
TEST_F(SharedNeuSightDataTest, JoinsTheHopperCaptureOnSharedConfigurations) {
  const auto db = Devices();
  std::vector<std::string> ids;
  auto rows = LoadJoined({dir, HABITAT_HOPPER_CAPTURE_DIR}, {"add", "ln"}, db, &ids);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(
      ids, ElementsAre("P4", "P100", "T4", "V100-PCIE-32GB", "A100-PCIE-40GB", "H100-SXM", "H200"));
  // measure_ops.py measured NeuSight's configurations: every one joins.
  EXPECT_EQ(rows->size(), 1749u + 1397u);
  for (const auto& r : *rows) ASSERT_EQ(r.by_device.size(), 7u);
}

TEST(NeuSightDataTest, OneGpuInTwoRootsIsAnError) {
  const auto db = Devices();
  std::vector<std::string> ids;
  auto rows =
      LoadJoined({HABITAT_HOPPER_CAPTURE_DIR, HABITAT_HOPPER_CAPTURE_DIR}, {"add"}, db, &ids);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(rows.status().message()), HasSubstr("a second file of H100-SXM"));
}

// A real capture (measure_ops.py on an H100 SXM and an H200, 2026-11-22):
// the fits must land where these GPUs can be (datasheet 3.35 and 4.8 TB/s; a
// streaming kernel gets 80-95% of it; CUPTI durations have a fixed part of
// a few microseconds).
TEST(FitTest, RealHopperCapture) {
  const auto db = Devices();
  std::vector<std::string> ids;
  auto rows = LoadJoined({HABITAT_HOPPER_CAPTURE_DIR},
                         {"add", "mulu", "relu", "gelu", "softmax", "ln"}, db, &ids);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_THAT(ids, ElementsAre("H100-SXM", "H200"));
  // Both GPUs measured the same 1749 + 1397 configurations.
  EXPECT_EQ(rows->size(), 5u * 1749u + 1397u);
  std::vector<const JoinedRow*> ptrs;
  for (const auto& r : *rows) ptrs.push_back(&r);
  auto host = FitConstants(ptrs, ids);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_GT(host->at("H200").streaming_bandwidth_gbps, 0.8 * 4800);
  EXPECT_LT(host->at("H200").streaming_bandwidth_gbps, 0.95 * 4800);
  EXPECT_GT(host->at("H200").op_latency_floor_ns, 5000);
  EXPECT_LT(host->at("H200").op_latency_floor_ns, 30000);
  auto kernel = FitKernelDurationLine(ptrs, "H200", 4 * 62914560);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_GT(kernel->streaming_bandwidth_gbps, 0.8 * 4800);
  EXPECT_LT(kernel->streaming_bandwidth_gbps, 0.95 * 4800);
  EXPECT_GT(kernel->kernel_fixed_latency_ns, 500);
  EXPECT_LT(kernel->kernel_fixed_latency_ns, 10000);
  // Without durations above the byte threshold there is nothing to fit.
  EXPECT_FALSE(FitKernelDurationLine(ptrs, "H200", int64_t{1} << 40).ok());
  auto h100 = FitKernelDurationLine(ptrs, "H100-SXM", 4 * 52428800);
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_GT(h100->streaming_bandwidth_gbps, 0.8 * 3350);
  EXPECT_LT(h100->streaming_bandwidth_gbps, 0.95 * 3350);
}

}  // namespace
}  // namespace habitat::eval
