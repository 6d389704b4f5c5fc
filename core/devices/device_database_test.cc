#include "core/devices/device_database.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using habitat::v1::DeviceSpec;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kDevicesFile = std::string(HABITAT_DATA_DIR) + "/devices.textproto";

habitat::v1::DeviceDatabase RealProto() {
  auto text = ReadFile(kDevicesFile);
  EXPECT_TRUE(text.ok()) << text.status();
  habitat::v1::DeviceDatabase proto;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, &proto));
  return proto;
}

DeviceSpec* MutableSpec(habitat::v1::DeviceDatabase& proto, const std::string& id) {
  for (DeviceSpec& spec : *proto.mutable_devices()) {
    if (spec.id() == id) return &spec;
  }
  ADD_FAILURE() << "no GPU " << id << " in " << kDevicesFile;
  return proto.add_devices();
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(DeviceDatabaseTest, RealFileLoads) {
  auto db = DeviceDatabase::LoadFromFile(kDevicesFile);
  ASSERT_TRUE(db.ok()) << db.status();
  // Every id the project promises to other components.
  for (const char* id : {"P4",
                         "P100",
                         "T4",
                         "V100-PCIE-32GB",
                         "V100-SXM2",
                         "P4000",
                         "RTX2070",
                         "RTX2080Ti",
                         "RTX3090",
                         "RTX4090",
                         "RTX5090",
                         "A10G",
                         "A100-PCIE-40GB",
                         "A100-PCIE-80GB",
                         "A100-SXM-40GB",
                         "A100-SXM-80GB",
                         "L4",
                         "L40S",
                         "H100-PCIE",
                         "H100-SXM",
                         "H200",
                         "B200"}) {
    EXPECT_NE(db->Find(id), nullptr) << id;
  }
  EXPECT_EQ(db->devices().front().id(), "P4");  // file order
  // Copy bandwidth measured on the H100 SXM and H200 machines.
  EXPECT_GT(db->Find("H100-SXM")->measured_memory_bandwidth_gbps(), 0);
  EXPECT_GT(db->Find("H200")->measured_memory_bandwidth_gbps(), 0);
}

TEST(DeviceDatabaseTest, LookupsById) {
  auto db = DeviceDatabase::LoadFromFile(kDevicesFile);
  ASSERT_TRUE(db.ok()) << db.status();
  const DeviceSpec* t4 = db->Find("T4");
  ASSERT_NE(t4, nullptr);
  EXPECT_EQ(t4->sm_count(), 40u);
  EXPECT_EQ(t4->compute_capability_major(), 7u);
  EXPECT_EQ(t4->compute_capability_minor(), 5u);
  auto got = db->Get("H100-SXM");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)->sm_count(), 132u);

  EXPECT_EQ(db->Find("t4"), nullptr);  // Find's ids are exact
  auto missing = db->Get("GTX1080");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("GTX1080"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("H100-SXM"));
  EXPECT_THAT(std::string(missing.status().message()), Not(HasSubstr("did you mean")));
}

// Get takes names as people type them: ids in any case, and the names
// nvidia-smi prints; a near miss gets the closest id.
TEST(DeviceDatabaseTest, GetTakesNamesAsPeopleTypeThem) {
  auto db = DeviceDatabase::LoadFromFile(kDevicesFile);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::pair<const char*, const char*> cases[] = {
      {"h100-sxm", "H100-SXM"}, {"t4", "T4"},        {"NVIDIA A100-SXM4-40GB", "A100-SXM-40GB"},
      {"Tesla T4", "T4"},       {"nvidia l4", "L4"},
  };
  for (const auto& [typed, id] : cases) {
    auto got = db->Get(typed);
    ASSERT_TRUE(got.ok()) << typed << ": " << got.status();
    EXPECT_EQ((*got)->id(), id) << typed;
  }
  auto near = db->Get("H100-SMX");
  EXPECT_EQ(near.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(near.status().message()), HasSubstr("(did you mean 'H100-SXM'?)"));
}

// The names NeuSight's measurements and device configs carry in their Device
// column (cudaDeviceProp.name on those machines) must resolve.
TEST(DeviceDatabaseTest, NeuSightDriverNamesResolve) {
  auto db = DeviceDatabase::LoadFromFile(kDevicesFile);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::pair<const char*, const char*> cases[] = {
      {"Tesla P4", "P4"},
      {"Tesla P100-PCIE-16GB", "P100"},
      {"Tesla T4", "T4"},
      {"Tesla V100-PCIE-32GB", "V100-PCIE-32GB"},
      {"NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB"},
      {"NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"},
      {"NVIDIA A100-SXM4-40GB", "A100-SXM-40GB"},
      {"NVIDIA H100 80GB HBM3", "H100-SXM"},
      {"NVIDIA L4", "L4"},
      {"NVIDIA H200", "H200"},
  };
  for (const auto& [name, id] : cases) {
    const DeviceSpec* spec = db->FindByDriverName(name);
    ASSERT_NE(spec, nullptr) << name;
    EXPECT_EQ(spec->id(), id) << name;
  }
  // Case and padding differ between driver versions.
  const DeviceSpec* t4 = db->FindByDriverName("  tesla t4 ");
  ASSERT_NE(t4, nullptr);
  EXPECT_EQ(t4->id(), "T4");
  EXPECT_EQ(db->FindByDriverName("Tesla K80"), nullptr);
}

TEST(DeviceDatabaseTest, RealDataIsSelfConsistent) {
  auto db = DeviceDatabase::LoadFromFile(kDevicesFile);
  ASSERT_TRUE(db.ok()) << db.status();
  for (const DeviceSpec& s : db->devices()) {
    // Per compute capability, the reserved shared memory appears with Ampere.
    const bool ampere_or_later = s.compute_capability_major() >= 8;
    EXPECT_EQ(s.reserved_shared_memory_per_block_bytes(), ampere_or_later ? 1024u : 0u) << s.id();
    EXPECT_EQ(s.shared_memory_allocation_unit_bytes(), ampere_or_later ? 128u : 256u) << s.id();
    // Tensor throughput never below the plain FP32 rate where present.
    if (s.peak_fp16_tensor_tflops() > 0) {
      EXPECT_GT(s.peak_fp16_tensor_tflops(), s.peak_fp32_tflops()) << s.id();
    }
  }
}

struct BrokenCase {
  std::string name;
  std::string gpu;
  std::function<void(DeviceSpec&)> mutate;
  std::string field;  // must appear in the message
};

void PrintTo(const BrokenCase& c, std::ostream* os) { *os << c.name; }

class DeviceValidationTest : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(DeviceValidationTest, RejectsWithGpuAndField) {
  const BrokenCase& c = GetParam();
  habitat::v1::DeviceDatabase proto = RealProto();
  c.mutate(*MutableSpec(proto, c.gpu));
  auto db = DeviceDatabase::FromProto(proto, "devices.textproto");
  ASSERT_FALSE(db.ok()) << c.name;
  EXPECT_EQ(db.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(db.status().message()),
              HasSubstr(absl::StrCat("devices.textproto: GPU \"", c.gpu, "\"")));
  EXPECT_THAT(std::string(db.status().message()), HasSubstr(c.field));
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

INSTANTIATE_TEST_SUITE_P(EveryRule, DeviceValidationTest,
                         ::
                             testing::Values(BrokenCase{"NegativeBandwidth", "T4",
                                                        [](DeviceSpec& s) {
                                                          s.set_memory_bandwidth_gbps(-1);
                                                        },
                                                        "memory_bandwidth_gbps must be > 0"},
                                             BrokenCase{"ZeroBandwidth", "T4",
                                                        [](DeviceSpec& s) {
                                                          s.set_memory_bandwidth_gbps(0);
                                                        },
                                                        "memory_bandwidth_gbps"},
                                             BrokenCase{"HugeBandwidth", "H100-SXM",
                                                        [](DeviceSpec& s) {
                                                          s.set_memory_bandwidth_gbps(3.35e6);
                                                        },
                                                        "memory_bandwidth_gbps"},
                                             BrokenCase{"NaNMeasuredBandwidth", "H200",
                                                        [](DeviceSpec& s) {
                                                          s.set_measured_memory_bandwidth_gbps(
                                                              kNaN);
                                                        },
                                                        "measured_memory_bandwidth_gbps"},
                                             BrokenCase{
                                                 "MeasuredAbovePeak", "H100-SXM",
                                                 [](DeviceSpec& s) {
                                                   s.set_measured_memory_bandwidth_gbps(3400);
                                                 },
                                                 "measured_memory_bandwidth_gbps must not exceed"},
                                             BrokenCase{"NoSms", "P100",
                                                        [](DeviceSpec& s) { s.set_sm_count(0); },
                                                        "sm_count"},
                                             BrokenCase{"TooManySms", "P100",
                                                        [](DeviceSpec& s) { s.set_sm_count(5000); },
                                                        "sm_count"},
                                             BrokenCase{"WarpSize", "V100-PCIE-32GB",
                                                        [](DeviceSpec& s) { s.set_warp_size(64); },
                                                        "warp_size"},
                                             BrokenCase{
                                                 "ThreadsVsWarps", "A100-PCIE-40GB",
                                                 [](DeviceSpec& s) { s.set_max_warps_per_sm(48); },
                                                 "max_threads_per_sm must equal"},
                                             BrokenCase{"BlockThreadsOverSm", "T4",
                                                        [](DeviceSpec& s) {
                                                          s.set_max_threads_per_block(2048);
                                                        },
                                                        "max_threads_per_block"},
                                             BrokenCase{"BlockThreadsNotWarpMultiple", "T4",
                                                        [](DeviceSpec& s) {
                                                          s.set_max_threads_per_block(1000);
                                                        },
                                                        "max_threads_per_block"},
                                             BrokenCase{
                                                 "NoBlocksPerSm", "T4",
                                                 [](DeviceSpec& s) { s.set_max_blocks_per_sm(0); },
                                                 "max_blocks_per_sm"},
                                             BrokenCase{"BlockRegistersOverSm", "P4",
                                                        [](DeviceSpec& s) {
                                                          s.set_max_registers_per_block(131072);
                                                        },
                                                        "max_registers_per_block"},
                                             BrokenCase{
                                                 "NoRegisters", "P4",
                                                 [](DeviceSpec& s) { s.set_registers_per_sm(0); },
                                                 "registers_per_sm"},
                                             BrokenCase{"NoRegistersPerThread", "P4",
                                                        [](DeviceSpec& s) {
                                                          s.set_max_registers_per_thread(0);
                                                        },
                                                        "max_registers_per_thread"},
                                             BrokenCase{"NoRegisterUnit", "P4",
                                                        [](DeviceSpec& s) {
                                                          s.set_register_allocation_unit(0);
                                                        },
                                                        "register_allocation_unit"},
                                             BrokenCase{"BlockSharedOverSm", "H100-SXM",
                                                        [](DeviceSpec& s) {
                                                          s.set_max_shared_memory_per_block_bytes(
                                                              300000);
                                                        },
                                                        "max_shared_memory_per_block_bytes"},
                                             BrokenCase{"NoSharedPerSm", "H100-SXM",
                                                        [](DeviceSpec& s) {
                                                          s.set_shared_memory_per_sm_bytes(0);
                                                        },
                                                        "shared_memory_per_sm_bytes"},
                                             BrokenCase{
                                                 "ReservedDoesNotFit", "A100-PCIE-80GB",
                                                 [](DeviceSpec& s) {
                                                   s.set_reserved_shared_memory_per_block_bytes(
                                                       4096);
                                                 },
                                                 "reserved_shared_memory_per_block_bytes"},
                                             BrokenCase{"SharedUnitNotPowerOfTwo", "A100-PCIE-80GB",
                                                        [](DeviceSpec& s) {
                                                          s.set_shared_memory_allocation_unit_bytes(
                                                              100);
                                                        },
                                                        "shared_memory_allocation_unit_bytes"},
                                             BrokenCase{
                                                 "NoBoostClock", "T4",
                                                 [](DeviceSpec& s) { s.set_boost_clock_mhz(0); },
                                                 "boost_clock_mhz"},
                                             BrokenCase{
                                                 "BaseAboveBoost", "T4",
                                                 [](DeviceSpec& s) { s.set_base_clock_mhz(2000); },
                                                 "base_clock_mhz"},
                                             BrokenCase{"SustainedClockBelowBase", "T4",
                                                        [](DeviceSpec& s) {
                                                          s.set_sustained_clock_mhz(100);
                                                          s.set_sustained_clock_source("x");
                                                        },
                                                        "sustained_clock_mhz"},
                                             BrokenCase{"SustainedClockWithoutSource", "T4",
                                                        [](DeviceSpec& s) {
                                                          s.set_sustained_clock_mhz(1500);
                                                        },
                                                        "sustained_clock_source"},
                                             BrokenCase{
                                                 "NoMemory", "T4",
                                                 [](DeviceSpec& s) { s.set_memory_bytes(0); },
                                                 "memory_bytes"},
                                             BrokenCase{
                                                 "NoL2", "T4",
                                                 [](DeviceSpec& s) { s.set_l2_cache_bytes(0); },
                                                 "l2_cache_bytes"},
                                             BrokenCase{
                                                 "NoFp32", "T4",
                                                 [](DeviceSpec& s) { s.set_peak_fp32_tflops(0); },
                                                 "peak_fp32_tflops"},
                                             BrokenCase{"NegativeTf32", "A100-PCIE-40GB",
                                                        [](DeviceSpec& s) {
                                                          s.set_peak_tf32_tflops(-156);
                                                        },
                                                        "peak_tf32_tflops"},
                                             BrokenCase{
                                                 "InfiniteFp16", "A100-PCIE-40GB",
                                                 [](DeviceSpec& s) {
                                                   s.set_peak_fp16_tensor_tflops(
                                                       std::numeric_limits<double>::infinity());
                                                 },
                                                 "peak_fp16_tensor_tflops"},
                                             BrokenCase{"NaNBf16", "A100-PCIE-40GB",
                                                        [](DeviceSpec& s) {
                                                          s.set_peak_bf16_tensor_tflops(kNaN);
                                                        },
                                                        "peak_bf16_tensor_tflops"},
                                             BrokenCase{"NoSource", "H200",
                                                        [](DeviceSpec& s) { s.clear_source(); },
                                                        "source must not be empty"},
                                             BrokenCase{
                                                 "NoDisplayName", "H200",
                                                 [](DeviceSpec& s) { s.clear_display_name(); },
                                                 "display_name"},
                                             BrokenCase{
                                                 "NoArchitecture", "H200",
                                                 [](DeviceSpec& s) { s.clear_architecture(); },
                                                 "architecture"},
                                             BrokenCase{
                                                 "NoDriverNames", "H200",
                                                 [](DeviceSpec& s) { s.clear_driver_names(); },
                                                 "driver_names"},
                                             BrokenCase{
                                                 "BlankDriverName", "H200",
                                                 [](DeviceSpec& s) { s.add_driver_names("  "); },
                                                 "driver_names[1]"},
                                             BrokenCase{"NoComputeCapability", "H200",
                                                        [](DeviceSpec& s) {
                                                          s.set_compute_capability_major(0);
                                                        },
                                                        "compute_capability_major"},
                                             BrokenCase{
                                                 "BadMinor", "H200",
                                                 [](DeviceSpec&
                                                        s) { s.set_compute_capability_minor(10); },
                                                 "compute_capability_minor"},
                                             BrokenCase{"NegativeStreamingBandwidth", "T4",
                                                        [](DeviceSpec& s) {
                                                          s.set_streaming_bandwidth_gbps(-5);
                                                          s.set_scaling_constants_source("test");
                                                        },
                                                        "streaming_bandwidth_gbps"},
                                             BrokenCase{"NegativeOpLatency", "T4",
                                                        [](DeviceSpec& s) {
                                                          s.set_op_fixed_latency_ns(-1);
                                                          s.set_scaling_constants_source("test");
                                                        },
                                                        "op_fixed_latency_ns"},
                                             BrokenCase{"HugeKernelLatency", "T4",
                                                        [](DeviceSpec& s) {
                                                          s.set_kernel_fixed_latency_ns(int64_t{5}
                                                                                        << 40);
                                                          s.set_scaling_constants_source("test");
                                                        },
                                                        "kernel_fixed_latency_ns"},
                                             BrokenCase{"ScalingConstantWithoutSource", "T4",
                                                        [](DeviceSpec& s) {
                                                          s.set_op_latency_floor_ns(9000);
                                                          s.clear_scaling_constants_source();
                                                        },
                                                        "scaling_constants_source"},
                                             BrokenCase{"LowLinkFigureAboveTheUsual", "H200",
                                                        [](DeviceSpec& s) {
                                                          s.mutable_interconnect()
                                                              ->set_allreduce_busbw_low_gbps(400);
                                                        },
                                                        "allreduce_busbw_low_gbps must be below"},
                                             BrokenCase{"LinkWithoutSource", "H200",
                                                        [](DeviceSpec& s) {
                                                          s.mutable_interconnect()->clear_source();
                                                        },
                                                        "interconnect.source"},
                                             BrokenCase{"DuplicateDriverName", "H200",
                                                        [](DeviceSpec& s) {
                                                          s.add_driver_names("TESLA T4");
                                                        },
                                                        "driver_names entry \"TESLA T4\" is also "
                                                        "listed by GPU "
                                                        "\"T4\""}),
                         [](const ::testing::TestParamInfo<BrokenCase>& info) {
                           return info.param.name;
                         });

TEST(DeviceDatabaseTest, RejectsDuplicateId) {
  habitat::v1::DeviceDatabase proto = RealProto();
  DeviceSpec copy = *MutableSpec(proto, "T4");
  copy.clear_driver_names();
  copy.add_driver_names("Some other name");
  *proto.add_devices() = copy;
  auto db = DeviceDatabase::FromProto(proto, "devices.textproto");
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(std::string(db.status().message()),
              HasSubstr("GPU \"T4\": id is used more than once"));
}

TEST(DeviceDatabaseTest, RejectsEmptyAndBadIds) {
  habitat::v1::DeviceDatabase proto = RealProto();
  MutableSpec(proto, "T4")->set_id("T 4");
  auto db = DeviceDatabase::FromProto(proto, "devices.textproto");
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(std::string(db.status().message()), HasSubstr("GPU \"T 4\": id"));

  MutableSpec(proto, "T 4")->clear_id();
  db = DeviceDatabase::FromProto(proto, "devices.textproto");
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(std::string(db.status().message()), HasSubstr("id must not be empty"));

  EXPECT_FALSE(DeviceDatabase::FromProto({}, "empty").ok());
}

TEST(DeviceDatabaseTest, TestOnlyDeviceNeedsNoDriverName) {
  habitat::v1::DeviceDatabase proto = RealProto();
  DeviceSpec partition = *MutableSpec(proto, "H100-SXM");
  partition.set_id("H100-SXM-66SM");
  partition.set_sm_count(66);
  partition.clear_driver_names();
  partition.set_test_only(true);
  *proto.add_devices() = partition;
  auto db = DeviceDatabase::FromProto(proto, "devices.textproto");
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_NE(db->Find("H100-SXM-66SM"), nullptr);
  EXPECT_TRUE(db->Find("H100-SXM-66SM")->test_only());
  EXPECT_EQ(db->devices().back().id(), "H100-SXM-66SM");
}

TEST(DeviceDatabaseTest, MeasuredScalingConstantsWithSourceAccepted) {
  habitat::v1::DeviceDatabase proto = RealProto();
  DeviceSpec* t4 = MutableSpec(proto, "T4");
  t4->set_streaming_bandwidth_gbps(240);
  t4->set_op_fixed_latency_ns(12000);
  t4->set_scaling_constants_source("fitted on some measurements");
  EXPECT_TRUE(DeviceDatabase::FromProto(proto, "devices.textproto").ok());
}

TEST(DeviceDatabaseTest, ParseErrorHasLineAndColumn) {
  const std::string path =
      WriteTemp("bad_devices.textproto", "devices {\n  id: \"X\"\n  sm_count: many\n}\n");
  auto db = DeviceDatabase::LoadFromFile(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(db.status().message()), HasSubstr("bad_devices.textproto"));
  EXPECT_THAT(std::string(db.status().message()), HasSubstr("line 3, column 13"));
}

TEST(DeviceDatabaseTest, UnknownFieldIsAParseError) {
  const std::string path = WriteTemp("unknown_field.textproto", "devices {\n  sm_cnt: 4\n}\n");
  auto db = DeviceDatabase::LoadFromFile(path);
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(std::string(db.status().message()), HasSubstr("line 2"));
  EXPECT_THAT(std::string(db.status().message()), HasSubstr("sm_cnt"));
}

TEST(DeviceDatabaseTest, MissingFileIsAnError) {
  auto db = DeviceDatabase::LoadFromFile(::testing::TempDir() + "/does_not_exist.textproto");
  EXPECT_FALSE(db.ok());
}

TEST(DeviceDatabaseTest, ValidationErrorFromFileNamesTheFile) {
  habitat::v1::DeviceDatabase proto = RealProto();
  MutableSpec(proto, "T4")->set_memory_bandwidth_gbps(-1);
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(proto, &text));
  const std::string path = WriteTemp("devices.textproto", text);
  auto db = DeviceDatabase::LoadFromFile(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().message(),
            "devices.textproto: GPU \"T4\": memory_bandwidth_gbps must be > 0 "
            "and < 100000 (got -1)");
}

}  // namespace
}  // namespace habitat
