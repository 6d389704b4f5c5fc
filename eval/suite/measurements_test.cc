#include "eval/suite/measurements.h"

#include <string>

#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace eval {
namespace {

using testing::HasSubstr;

TEST(MeasurementsTest, LoadsTheCommittedH100Captures) {
  auto cases = LoadMeasurements(HABITAT_TESTDATA_DIR "/measurements/h100.json");
  ASSERT_TRUE(cases.ok()) << cases.status();
  EXPECT_EQ(cases->size(), 28u);
  const MeasuredCase& c = cases->at("resnet50_b16_fp32");
  EXPECT_EQ(c.model, "resnet50");
  EXPECT_EQ(c.batch, 16u);
  EXPECT_EQ(c.precision, "fp32");
  EXPECT_EQ(c.wall_ns, 20509600);
  EXPECT_EQ(c.busy_ns, 10714730);
  EXPECT_DOUBLE_EQ(c.host_share, 0.4776);
}

absl::Status LoadText(const std::string& text) {
  // One file per test: CTest runs the tests of this binary in parallel.
  const auto* test = testing::UnitTest::GetInstance()->current_test_info();
  const std::string path = testing::TempDir() + "/measurements_" + test->name() + ".json";
  EXPECT_TRUE(WriteFileAtomically(path, text).ok());
  return LoadMeasurements(path).status();
}

constexpr char kGood[] =
    "\"case\": \"a\", \"model\": \"m\", \"batch_size\": 2, \"precision\": \"fp32\", "
    "\"wall_ns_median\": 10, \"gpu_busy_ns_median\": 5, \"host_share\": 0.5";

// A one-case document with `field`'s value replaced by `value`.
absl::Status LoadWith(const std::string& field, const std::string& value) {
  std::string item = kGood;
  const size_t at = item.find("\"" + field + "\": ") + field.size() + 4;
  item.replace(
      at, item.find(',', at) == std::string::npos ? std::string::npos : item.find(',', at) - at,
      value);
  return LoadText("{\"cases\": [{" + item + "}]}");
}

TEST(MeasurementsTest, NamesTheBadField) {
  EXPECT_THAT(LoadText("{").message(), HasSubstr("not JSON"));
  EXPECT_THAT(LoadText("{\"cases\": 3}").message(), HasSubstr("no \"cases\" array"));
  const std::string good = kGood;
  EXPECT_TRUE(LoadText("{\"cases\": [{" + good + "}]}").ok());
  EXPECT_THAT(LoadText("{\"cases\": [{" + good + "}, {\"case\": \"b\"}]}").message(),
              HasSubstr("cases[1].model is missing"));
  EXPECT_THAT(LoadWith("batch_size", "\"2\"").message(), HasSubstr("batch_size is not an integer"));
  EXPECT_THAT(LoadWith("model", "3").message(), HasSubstr("cases[0].model is not a string"));
  EXPECT_THAT(LoadText("{\"cases\": [{" + good + "}, {" + good + "}]}").message(),
              HasSubstr("cases[1].case repeats \"a\""));
  EXPECT_THAT(LoadMeasurements("/nonexistent/m.json").status().message(),
              HasSubstr("/nonexistent/m.json"));
}

TEST(MeasurementsTest, RejectsValuesOutOfRange) {
  EXPECT_TRUE(LoadWith("host_share", "0.25").ok());
  EXPECT_THAT(LoadWith("batch_size", "0").message(), HasSubstr("batch_size is out of range"));
  EXPECT_THAT(LoadWith("wall_ns_median", "-1").message(),
              HasSubstr("wall_ns_median is not positive"));
  EXPECT_THAT(LoadWith("host_share", "1.5").message(), HasSubstr("host_share is outside"));
}

TEST(MeasurementsTest, PrecisionOfTheTrace) {
  EXPECT_EQ(*TracePrecision("bf16"), habitat::v1::PRECISION_AMP_BF16);
  EXPECT_EQ(*TracePrecision("fp32"), habitat::v1::PRECISION_FP32);
  EXPECT_THAT(TracePrecision("fp8").status().message(), HasSubstr("\"fp8\""));
}

}  // namespace
}  // namespace eval
}  // namespace habitat
