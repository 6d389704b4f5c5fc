// The engine with the trained kernel-varying predictor
// (models/kernel_varying) on a real ResNet-50 iteration captured on an H100.
#include "core/predict/varying_predictor.h"

#include <memory>

#include "absl/strings/match.h"
#include "core/predict/prediction_engine.h"
#include "core/predict/test_fixtures.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

class VaryingPredictorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = DeviceDatabase::LoadFromFile(std::string(HABITAT_DATA_DIR) +
                                                "/devices.textproto");
    ASSERT_TRUE(devices.ok()) << devices.status();
    devices_ = std::make_unique<DeviceDatabase>(std::move(*devices));
    auto trace = testing::LoadKinetoFixture("h100", "resnet50_b16_fp32", 16);
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = std::move(*trace);
    auto varying =
        VaryingPredictor::Load(std::string(HABITAT_MODELS_DIR) + "/kernel_varying", 4096);
    ASSERT_TRUE(varying.ok()) << varying.status();
    varying_ = std::move(*varying);
  }

  const v1::DevicePrediction& For(const v1::PredictResponse& response, const std::string& id) {
    for (const auto& p : response.predictions()) {
      if (p.device_id() == id) return p;
    }
    ADD_FAILURE() << "no prediction for " << id;
    return response.predictions(0);
  }

  std::unique_ptr<DeviceDatabase> devices_;
  v1::Trace trace_;
  std::shared_ptr<VaryingPredictor> varying_;
};

TEST_F(VaryingPredictorTest, ConvolutionsComeFromTheModelAndSayWhetherItKnowsTheGpu) {
  PredictionEngine engine(devices_.get(), nullptr, varying_);
  PredictionQuery query;
  query.devices = {"V100-PCIE-32GB", "T4", "L4", "H200"};
  query.include_breakdown = true;
  auto response = engine.Predict(trace_, "", query);
  ASSERT_TRUE(response.ok()) << response.status();
  // fp32 conv2d and linear were measured on the V100 and the T4 (NeuSight),
  // never on an L4.
  for (const auto& [id, trained] : std::vector<std::pair<std::string, bool>>{
           {"V100-PCIE-32GB", true}, {"T4", true}, {"L4", false}}) {
    const auto& prediction = For(*response, id);
    int from_model = 0;
    for (const auto& op : prediction.operations()) {
      if (op.name() != "aten::conv2d") continue;
      if (op.method() != v1::PREDICTION_METHOD_MLP) {
        // Only launch-bound convolutions fall back to wave scaling.
        EXPECT_EQ(op.method(), v1::PREDICTION_METHOD_WAVE_SCALING) << id;
        EXPECT_LT(op.origin_forward_ns(), varying_->model().min_origin_ns()) << id;
        continue;
      }
      ++from_model;
      EXPECT_EQ(op.predictor_trained_on_target(), trained) << id;
      EXPECT_GT(op.predicted_forward_ns(), 0) << id;
    }
    EXPECT_GT(from_model, 40) << id;  // ResNet-50 has 53 convolutions
    bool warned = false;
    for (const auto& w : prediction.warnings()) {
      warned = warned || absl::StrContains(w, "outside its training data");
    }
    EXPECT_EQ(warned, !trained) << id;
  }
  // The H200 differs from the H100 only in memory: same kernels, so its
  // convolutions are wave-scaled, not sent to the model.
  for (const auto& op : For(*response, "H200").operations()) {
    EXPECT_NE(op.method(), v1::PREDICTION_METHOD_MLP) << op.name();
  }
  // An older, slower GPU takes longer for the same convolutions.
  EXPECT_GT(For(*response, "T4").iteration_ns(), 3 * For(*response, "H200").iteration_ns());
}

TEST_F(VaryingPredictorTest, RepeatedSignaturesAreEvaluatedOnceAndMemoised) {
  auto origin = devices_->Get("H100-SXM");
  auto a100 = devices_->Get("A100-SXM-80GB");
  ASSERT_TRUE(origin.ok() && a100.ok());
  auto first = varying_->PredictTrace(trace_, **origin, {*a100});
  ASSERT_TRUE(first.ok()) << first.status();
  const int64_t evaluated = varying_->memo_misses();
  // ResNet-50 repeats its bottleneck blocks: fewer distinct signatures than
  // covered passes.
  EXPECT_GT(evaluated, 0);
  EXPECT_LT(evaluated, static_cast<int64_t>((*first)[0].size()));
  auto second = varying_->PredictTrace(trace_, **origin, {*a100});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(varying_->memo_misses(), evaluated);
  EXPECT_EQ(varying_->memo_hits(), evaluated);
  for (const auto& [key, pass] : (*first)[0]) {
    EXPECT_EQ((*second)[0].at(key).predicted_ns, pass.predicted_ns);
  }
}

TEST_F(VaryingPredictorTest, OriginTargetGetsNothingFromTheModel) {
  auto origin = devices_->Get("H100-SXM");
  ASSERT_TRUE(origin.ok());
  auto tables = varying_->PredictTrace(trace_, **origin, {*origin});
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_TRUE((*tables)[0].empty());
  EXPECT_EQ(varying_->memo_misses(), 0);
}

TEST_F(VaryingPredictorTest, SameComputeTargetGetsNothingFromTheModel) {
  // The H200 runs the H100's kernels; the engine wave-scales them, so the
  // model is not evaluated for it.
  auto origin = devices_->Get("H100-SXM");
  auto h200 = devices_->Get("H200");
  ASSERT_TRUE(origin.ok() && h200.ok());
  auto tables = varying_->PredictTrace(trace_, **origin, {*h200});
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_TRUE((*tables)[0].empty());
  EXPECT_EQ(varying_->memo_misses(), 0);
}

TEST(VaryingPredictorLoad, MissingModelNamesTheFile) {
  auto varying = VaryingPredictor::Load("/nonexistent/kernel_varying", 16);
  ASSERT_FALSE(varying.ok());
  EXPECT_TRUE(absl::StrContains(varying.status().message(), "/nonexistent/kernel_varying"))
      << varying.status();
}

}  // namespace
}  // namespace habitat
