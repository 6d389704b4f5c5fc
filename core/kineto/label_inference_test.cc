// InferBatchSize and InferPrecision on every real torch.profiler capture in
// tests/testdata/kineto: seven models (CNNs, transformers, GNMT's LSTM, a
// GAN) at two batch sizes, fp32 and bf16 autocast, on an H100 and an H200.
// The file names say the truth: <model>_b<batch>_<fp32|bf16>.json.gz.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"
#include "core/kineto/kineto_import.h"
#include "core/trace/trace_inference.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

struct Truth {
  std::string path;
  uint32_t batch = 0;
  v1::Precision precision = v1::PRECISION_UNSPECIFIED;
};

std::vector<Truth> Fixtures() {
  std::vector<Truth> fixtures;
  for (const char* gpu : {"h100", "h200"}) {
    const std::filesystem::path dir = std::filesystem::path(HABITAT_TESTDATA_DIR) / "kineto" / gpu;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string file = entry.path().filename().string();
      absl::string_view name = file;
      if (!absl::ConsumeSuffix(&name, ".json.gz")) continue;
      const std::vector<absl::string_view> parts = absl::StrSplit(name, '_');
      Truth truth{entry.path().string()};
      absl::string_view batch = parts[parts.size() - 2];
      if (!absl::ConsumePrefix(&batch, "b") || !absl::SimpleAtoi(batch, &truth.batch)) continue;
      truth.precision = parts.back() == "bf16" ? v1::PRECISION_AMP_BF16 : v1::PRECISION_FP32;
      fixtures.push_back(truth);
    }
  }
  return fixtures;
}

TEST(LabelInferenceTest, EveryCaptureGetsItsBatchAndPrecisionOrNoAnswer) {
  const std::vector<Truth> fixtures = Fixtures();
  ASSERT_GE(fixtures.size(), 28u);
  int batches = 0, precisions = 0;
  for (const Truth& truth : fixtures) {
    auto json = ReadFile(truth.path);
    ASSERT_TRUE(json.ok()) << json.status();
    auto trace = ImportKinetoTrace(*json, KinetoImportOptions{});
    ASSERT_TRUE(trace.ok()) << truth.path << ": " << trace.status();
    // A wrong answer is worse than none: the user is told to pass the flag.
    if (auto batch = InferBatchSize(*trace)) {
      EXPECT_EQ(batch->value, truth.batch) << truth.path << ": " << batch->evidence;
      ++batches;
    }
    if (auto precision = InferPrecision(*trace)) {
      EXPECT_EQ(precision->value, truth.precision) << truth.path << ": " << precision->evidence;
      ++precisions;
    }
  }
  // And an answer for every one of them.
  EXPECT_EQ(batches, static_cast<int>(fixtures.size()));
  EXPECT_EQ(precisions, static_cast<int>(fixtures.size()));
}

TEST(LabelInferenceTest, NoShapesNoAnswer) {
  v1::Trace trace;
  trace.add_operations()->set_name("aten::conv2d");
  EXPECT_FALSE(InferBatchSize(trace).has_value());
  EXPECT_FALSE(InferPrecision(trace).has_value());
}

TEST(LabelInferenceTest, SplitEvidenceGivesNoAnswer) {
  v1::Trace trace;
  for (int64_t leading : {8, 8, 16, 16}) {
    v1::Argument* input = trace.add_operations()->add_arguments();
    trace.mutable_operations(trace.operations_size() - 1)->set_name("aten::linear");
    input->set_name("0");
    input->mutable_tensor()->add_shape(leading);
    input->mutable_tensor()->add_shape(512);
    input->mutable_tensor()->set_dtype(leading == 8 ? "float" : "c10::Half");
  }
  EXPECT_FALSE(InferBatchSize(trace).has_value());
  EXPECT_FALSE(InferPrecision(trace).has_value());
  trace.mutable_operations(3)->mutable_arguments(0)->mutable_tensor()->set_shape(0, 8);
  trace.mutable_operations(3)->mutable_arguments(0)->mutable_tensor()->set_dtype("float");
  ASSERT_TRUE(InferBatchSize(trace).has_value());
  EXPECT_EQ(InferBatchSize(trace)->value, 8u);
  EXPECT_EQ(InferPrecision(trace)->value, v1::PRECISION_FP32);
}

}  // namespace
}  // namespace habitat
