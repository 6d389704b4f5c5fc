#include "core/scaling/occupancy.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/file_io.h"
#include "core/scaling/test_devices.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;

Occupancy Compute(const habitat::v1::DeviceSpec& d, int threads, int regs, int64_t static_smem = 0,
                  int64_t dynamic_smem = 0) {
  absl::StatusOr<Occupancy> o = ComputeOccupancy(d, {threads, regs, static_smem, dynamic_smem});
  EXPECT_TRUE(o.ok()) << o.status();
  return o.ok() ? *o : Occupancy{-1, OccupancyLimit::kBlocksPerSm};
}

TEST(OccupancyTest, BlocksPerSmLimit) {
  // 32 threads = 1 warp: warps allow 64 blocks, shared memory (1 KiB
  // reserved) 228, so the 32-block cap binds.
  Occupancy o = Compute(testing::H100(), 32, 0);
  EXPECT_EQ(o.blocks_per_sm, 32);
  EXPECT_EQ(o.limited_by, OccupancyLimit::kBlocksPerSm);
}

TEST(OccupancyTest, WarpsPerSmLimit) {
  // 256 threads = 8 warps; 64 warps per SM / 8 = 8 blocks.
  Occupancy o = Compute(testing::H100(), 256, 0);
  EXPECT_EQ(o.blocks_per_sm, 8);
  EXPECT_EQ(o.limited_by, OccupancyLimit::kWarpsPerSm);
  // Threads round up to whole warps: 33 threads take 2 warps -> 32 blocks
  // by warps, tying the block cap (ties report the block cap).
  EXPECT_EQ(Compute(testing::H100(), 33, 0).blocks_per_sm, 32);
  // 1000 threads -> 32 warps -> 2 blocks.
  EXPECT_EQ(Compute(testing::H100(), 1000, 0).blocks_per_sm, 2);
}

TEST(OccupancyTest, RegisterLimit) {
  // 64 regs x 32 threads = 2048 regs per warp; a quarter of the register
  // file (16384) holds 8 warps, 32 per SM, 128-thread blocks take 4 -> 8.
  Occupancy o = Compute(testing::H100(), 128, 64);
  EXPECT_EQ(o.blocks_per_sm, 8);
  EXPECT_EQ(o.limited_by, OccupancyLimit::kRegisters);
}

TEST(OccupancyTest, RegistersRoundUpToAllocationUnit) {
  // 33 regs x 32 = 1056 -> 1280 per warp; 16384 / 1280 = 12 warps per
  // quarter, 48 per SM, / 4 warps = 12 blocks (15 without the rounding).
  EXPECT_EQ(Compute(testing::H100(), 128, 33).blocks_per_sm, 12);
}

TEST(OccupancyTest, RegistersAllocatedPerPartition) {
  // 40 regs -> 1280 per warp. Per quarter: 12 warps, 48 per SM, 64-thread
  // blocks take 2 -> 24 (a pooled file would give 51 warps -> 25).
  EXPECT_EQ(Compute(testing::H100(), 64, 40).blocks_per_sm, 24);
  // P100 (cc 6.0) has two partitions of 32768: 25 warps each, 50 -> 25.
  EXPECT_EQ(Compute(testing::P100(), 64, 40).blocks_per_sm, 25);
}

TEST(OccupancyTest, SharedMemoryLimitIncludesReservedPerBlock) {
  // 38912 B + 1 KiB reserved = 39936 B per block; 233472 / 39936 = 5.8 -> 5
  // (without the reservation it would be exactly 6).
  Occupancy o = Compute(testing::H100(), 128, 0, 38912);
  EXPECT_EQ(o.blocks_per_sm, 5);
  EXPECT_EQ(o.limited_by, OccupancyLimit::kSharedMemory);
  // Static and dynamic add up.
  EXPECT_EQ(Compute(testing::H100(), 128, 0, 20000, 18912).blocks_per_sm, 5);
  // V100 reserves nothing: 98304 / 49152 = 2.
  EXPECT_EQ(Compute(testing::V100(), 128, 0, 49152).blocks_per_sm, 2);
}

TEST(OccupancyTest, SharedMemoryAtThePerBlockLimitFitsOnce) {
  // 232448 + 1024 reserved = 233472 = the whole SM.
  EXPECT_EQ(Compute(testing::H100(), 128, 0, 0, 232448).blocks_per_sm, 1);
}

TEST(OccupancyTest, RejectsImpossibleLaunches) {
  const auto h100 = testing::H100();
  auto s = MaxActiveBlocksPerSm(h100, {0, 0, 0, 0}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("threads_per_block"));
  s = MaxActiveBlocksPerSm(h100, {1025, 0, 0, 0}).status();
  EXPECT_THAT(s.message(), HasSubstr("threads_per_block"));
  s = MaxActiveBlocksPerSm(h100, {128, 256, 0, 0}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("registers_per_thread"));
  s = MaxActiveBlocksPerSm(h100, {128, 0, 0, 232449}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_shared_memory_per_block_bytes"));
  // 255 regs -> 8192 per warp x 32 warps = 262144 > 65536 per block.
  s = MaxActiveBlocksPerSm(h100, {1024, 255, 0, 0}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_registers_per_block"));
  s = MaxActiveBlocksPerSm(h100, {128, 0, -1, 0}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(OccupancyTest, RejectsSpecWithoutLimits) {
  auto spec = testing::H100();
  spec.set_warp_size(0);
  auto s = MaxActiveBlocksPerSm(spec, {128, 0, 0, 0}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("warp_size"));
}

// Checks every row of a CSV of real cudaOccupancyMaxActiveBlocksPerMultiprocessor
// values (columns kernel, regs_per_thread, static_smem_bytes, block_size,
// dynamic_smem_bytes, max_active_blocks_per_sm; others ignored) against the
// H100-SXM entry of data/devices.textproto.
void ExpectMatchesRecordedH100(const std::string& csv_path) {
  absl::StatusOr<std::string> db_text =
      ReadFile(std::string(HABITAT_DATA_DIR) + "/devices.textproto");
  ASSERT_TRUE(db_text.ok()) << db_text.status();
  habitat::v1::DeviceDatabase db;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(*db_text, &db));
  const habitat::v1::DeviceSpec* h100 = nullptr;
  for (const auto& d : db.devices()) {
    if (d.id() == "H100-SXM") h100 = &d;
  }
  ASSERT_NE(h100, nullptr) << "no H100-SXM in devices.textproto";

  absl::StatusOr<std::string> csv = ReadFile(csv_path);
  ASSERT_TRUE(csv.ok()) << csv.status();
  std::vector<absl::string_view> lines = absl::StrSplit(*csv, '\n', absl::SkipWhitespace());
  ASSERT_GT(lines.size(), 1u);
  std::vector<absl::string_view> header = absl::StrSplit(lines[0], ',');
  auto column = [&header](absl::string_view name) {
    for (size_t i = 0; i < header.size(); ++i) {
      if (absl::StripAsciiWhitespace(header[i]) == name) return static_cast<int>(i);
    }
    ADD_FAILURE() << "no column " << name;
    return 0;
  };
  const int c_kernel = column("kernel"), c_regs = column("regs_per_thread"),
            c_static = column("static_smem_bytes"), c_block = column("block_size"),
            c_dynamic = column("dynamic_smem_bytes"), c_blocks = column("max_active_blocks_per_sm");
  int checked = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], ',');
    ASSERT_EQ(f.size(), header.size()) << "line " << i + 1 << ": " << lines[i];
    int regs, block, want;
    int64_t smem_static, smem_dynamic;
    ASSERT_TRUE(absl::SimpleAtoi(f[c_regs], &regs) && absl::SimpleAtoi(f[c_block], &block) &&
                absl::SimpleAtoi(f[c_blocks], &want) &&
                absl::SimpleAtoi(f[c_static], &smem_static) &&
                absl::SimpleAtoi(f[c_dynamic], &smem_dynamic))
        << "line " << i + 1 << ": " << lines[i];
    absl::StatusOr<int> got = MaxActiveBlocksPerSm(*h100, {block, regs, smem_static, smem_dynamic});
    if (want <= 0) {
      // The driver says it cannot launch; we must refuse too.
      EXPECT_FALSE(got.ok() && *got > 0) << "line " << i + 1 << ": " << lines[i];
    } else {
      ASSERT_TRUE(got.ok()) << "line " << i + 1 << ": " << got.status();
      EXPECT_EQ(*got, want) << "line " << i + 1 << " (" << f[c_kernel] << "): " << lines[i];
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// Our own capture: core/scaling/testdata/occupancy_probe.cu on an H100 80GB
// HBM3 (1116 rows: 8 register counts 12-134, static shared memory 0-40 KiB,
// blocks of 32-1024 threads, dynamic shared memory 0-150000 B).
TEST(OccupancyTest, MatchesDriverOnH100) {
  ExpectMatchesRecordedH100(std::string(HABITAT_SCALING_TESTDATA_DIR) + "/h100_occupancy.csv");
}

// Helper H1's recording (tests/testdata/occupancy/h100.csv), once it exists.
TEST(OccupancyTest, MatchesRecordedH100Values) {
  const std::string csv_path = std::string(HABITAT_TESTDATA_DIR) + "/occupancy/h100.csv";
  if (!std::ifstream(csv_path).good()) {
    GTEST_SKIP() << csv_path << " not recorded yet";
  }
  ExpectMatchesRecordedH100(csv_path);
}

}  // namespace
}  // namespace habitat
