#include "eval/suite/host_speed.h"

#include <filesystem>
#include <map>
#include <string>

#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace eval {
namespace {

using testing::HasSubstr;

constexpr char kSuite[] = HABITAT_TESTDATA_DIR "/agent_suite";

TEST(HostSpeedTest, HostbenchIsTheMeanOfBeforeAndAfter) {
  // tests/testdata/agent_suite/h200/hostbench_{before,after}.json.
  auto ns = LoadHostbench(std::string(kSuite) + "/h200", "tiny_mlp_adam_step_ns");
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_NEAR(*ns, (1383159.61 + 1483411.235) / 2, 1e-6);
}

TEST(HostSpeedTest, HostbenchErrorsNameTheFileAndField) {
  auto missing = LoadHostbench(std::string(kSuite) + "/h100", "tiny_mlp_adam_step_ns");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr("hostbench_before.json"));
  auto no_field = LoadHostbench(std::string(kSuite) + "/h200", "no_such_metric");
  EXPECT_TRUE(absl::IsInvalidArgument(no_field.status())) << no_field.status();
  EXPECT_THAT(no_field.status().message(), HasSubstr("\"no_such_metric\""));
  EXPECT_THAT(no_field.status().message(), HasSubstr("hostbench_before.json"));

  const std::string dir = testing::TempDir() + "/hostbench_bad";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomically(dir + "/hostbench_after.json", "[1, 2").ok());
  auto bad = LoadHostbench(dir, "x");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("hostbench_after.json: not a JSON object"));
}

TEST(HostSpeedTest, ModelOfCase) {
  EXPECT_EQ(ModelOfCase("resnet50_b16_fp32"), "resnet50");
  EXPECT_EQ(ModelOfCase("inception_v3_b64_bf16"), "inception_v3");
  EXPECT_EQ(ModelOfCase("gpt2_b4_fp32"), "gpt2");
}

TEST(HostSpeedTest, CalibrationLeavesTheCasesModelOut) {
  const std::map<std::string, int64_t> origin = {{"a_b1_fp32", 100},
                                                 {"a_b2_fp32", 100},
                                                 {"b_b1_fp32", 200},
                                                 {"c_b1_fp32", 300},
                                                 {"d_b1_fp32", 400}};
  const std::map<std::string, int64_t> target = {{"a_b1_fp32", 1},
                                                 {"a_b2_fp32", 1},
                                                 {"b_b1_fp32", 100},
                                                 {"c_b1_fp32", 100},
                                                 {"d_b1_fp32", 100}};
  // a's own huge ratio (100) is left out: median of 2, 3, 4.
  EXPECT_DOUBLE_EQ(*HostSpeedFromOtherModels("a_b1_fp32", origin, target), 3.0);
  // For b: a (100, 100), c 3, d 4 -> median of four is (4 + 100) / 2.
  EXPECT_DOUBLE_EQ(*HostSpeedFromOtherModels("b_b1_fp32", origin, target), 52.0);
  // Nothing of another model on both hosts.
  EXPECT_FALSE(HostSpeedFromOtherModels("a_b1_fp32", {{"a_b1_fp32", 1}}, target).has_value());
}

}  // namespace
}  // namespace eval
}  // namespace habitat
