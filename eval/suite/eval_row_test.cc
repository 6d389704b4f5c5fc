#include "eval/suite/eval_row.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace eval {
namespace {

EvalRow Measured() {
  EvalRow row;
  row.case_name = "resnet50_b16_fp32";
  row.model = "resnet50";
  row.batch = 16;
  row.precision = "fp32";
  row.origin = "H100-SXM";
  row.target = "H200";
  row.origin_wall_ns = 20'000'000;
  row.origin_busy_ns = 10'000'000;
  row.origin_host_share = 0.5;
  return row;
}

TEST(EvalRowTest, LineHasOneFieldPerHeaderColumn) {
  const size_t columns = std::vector<std::string>(absl::StrSplit(CsvHeader(), ',')).size();
  EvalRow row = Measured();
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(CsvLine(row), ',')).size(), columns);
  row.has_target = row.has_prediction = true;
  FillBaselines(67, 67, 3350, 4800, row);
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(CsvLine(row), ',')).size(), columns);
}

TEST(EvalRowTest, MissingValuesAreEmptyAndErrorsQuoted) {
  EvalRow row = Measured();
  row.error = "INTERNAL: bad \"trace\", twice";
  const std::string line = CsvLine(row);
  EXPECT_THAT(line, testing::StartsWith(
                        "resnet50_b16_fp32,resnet50,16,fp32,H100-SXM,H200,20000000,10000000,"
                        "0.5000,,,,"));
  EXPECT_THAT(line, testing::EndsWith(",\"INTERNAL: bad \"\"trace\"\", twice\""));
}

TEST(EvalRowTest, BaselinesScaleInverselyWithThroughput) {
  EvalRow row = Measured();
  FillBaselines(60, 30, 2000, 4000, row);
  EXPECT_EQ(row.same_flops_busy_ns, 20'000'000);  // half the FLOPS: twice the time
  EXPECT_EQ(row.same_flops_wall_ns, 40'000'000);
  EXPECT_EQ(row.bandwidth_busy_ns, 5'000'000);  // twice the bandwidth: half
  EXPECT_EQ(row.bandwidth_wall_ns, 10'000'000);
}

TEST(EvalRowTest, BaselinesNeedEverySpec) {
  EvalRow row = Measured();
  FillBaselines(60, 0, 2000, 4000, row);
  EXPECT_EQ(row.same_flops_busy_ns, 0);
  EXPECT_EQ(row.bandwidth_busy_ns, 0);
}

TEST(EvalRowTest, ScaledBusyCarriesTheOpSumRatio) {
  EvalRow row = Measured();
  row.origin_op_sum_ns = 12'000'000;
  row.predicted_op_sum_ns = 9'000'000;
  FillScaledBusy(row);
  EXPECT_EQ(row.predicted_busy_scaled_ns, 7'500'000);
  row.origin_op_sum_ns = 0;
  FillScaledBusy(row);
  EXPECT_EQ(row.predicted_busy_scaled_ns, 0);
}

TEST(EvalRowTest, HostSpeedColumnsFollowTheKinetoOnes) {
  const std::string header = CsvHeader(true);
  EXPECT_THAT(header, testing::StartsWith(CsvHeader() + ",origin_tag,target_tag,"));
  const size_t columns = std::vector<std::string>(absl::StrSplit(header, ',')).size();
  EXPECT_EQ(columns, std::vector<std::string>(absl::StrSplit(CsvHeader(), ',')).size() + 6);
  EvalRow row = Measured();
  row.origin_tag = "h100_run2";
  row.target_tag = "h200";
  row.host_speed_hostbench = 1.41234;
  row.predicted_wall_hostbench_ns = 15'000'000;
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(CsvLine(row, true), ',')).size(), columns);
  // No calibrated speed: its two columns are empty.
  EXPECT_THAT(CsvLine(row, true), testing::EndsWith(",h100_run2,h200,1.4123,15000000,,"));
  // The Kineto format is unchanged by the agent fields.
  EXPECT_EQ(CsvLine(row), CsvLine(Measured()));
}

}  // namespace
}  // namespace eval
}  // namespace habitat
