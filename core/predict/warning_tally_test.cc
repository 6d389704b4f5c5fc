// Warnings' kinds and their grouping into PredictResponse.structured_warnings:
// by hand-built responses, and on a real ResNet-50 iteration captured on an
// H100 (tests/testdata/kineto/h100).
#include "core/predict/warning_tally.h"

#include <set>
#include <utility>

#include "core/predict/prediction_engine.h"
#include "core/testing/trace_fixtures.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Ids(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  return {ids.begin(), ids.end()};
}

TEST(WarningTallyTest, EveryKindHasASummary) {
  for (const char* kind : {warning_kind::kOutOfMemory, warning_kind::kUnscaledOperations,
                           warning_kind::kTargetOutsideTraining,
                           warning_kind::kOriginOutsideTraining, warning_kind::kMathModeFallback,
                           warning_kind::kPredictedOnSibling, warning_kind::kSplitAtRoofline,
                           warning_kind::kHardwareLimit, warning_kind::kAssumedGemmThroughput,
                           warning_kind::kGemmCeiling, warning_kind::kTf32SlowerThanFp32,
                           warning_kind::kTestOnlyDevice, warning_kind::kWallTimeFromGpuTime,
                           warning_kind::kOriginHostBound, warning_kind::kNoMemoryPrediction,
                           warning_kind::kSpotPricesMissing, warning_kind::kBatchScaled,
                           warning_kind::kBatchDimensionMissing, warning_kind::kNoBatchReruns}) {
    const absl::string_view summary = WarningSummary(kind);
    EXPECT_FALSE(summary.empty()) << kind;
    // One sentence on one line, that follows "N GPUs (...): ".
    EXPECT_EQ(summary.find('\n'), absl::string_view::npos) << kind;
    EXPECT_LE(summary.size(), 90u) << kind;
    EXPECT_TRUE(summary[0] >= 'a' && summary[0] <= 'z') << kind;
  }
  EXPECT_EQ(WarningSummary("no_such_kind"), "");
}

// One Warning per kind, in the fixed order of kinds; each distinct text a
// detail with its GPUs; a warning without a kind (from an older cache
// entry) a group of its own text, last.
TEST(WarningTallyTest, StructuredWarningsGroupByKind) {
  v1::PredictResponse response;
  auto add = [&response](const std::string& id) {
    v1::DevicePrediction* p = response.add_predictions();
    p->set_device_id(id);
    return p;
  };
  v1::DevicePrediction* a = add("A");
  AddDeviceWarning(warning_kind::kHardwareLimit, "2 operation(s) raised", a);
  AddDeviceWarning(warning_kind::kOutOfMemory, "may run out of memory: batch 64", a);
  v1::DevicePrediction* b = add("B");
  AddDeviceWarning(warning_kind::kHardwareLimit, "5 operation(s) raised", b);
  b->add_warnings("an old warning without a kind");
  v1::DevicePrediction* c = add("C");
  AddDeviceWarning(warning_kind::kHardwareLimit, "2 operation(s) raised", c);
  AddStructuredWarnings({{warning_kind::kNoMemoryPrediction, "no memory prediction: why", {}},
                         {warning_kind::kBatchScaled, "predicted at batch 64", {"A", "C"}}},
                        &response);
  const auto& warnings = response.structured_warnings();
  ASSERT_EQ(warnings.size(), 5);
  EXPECT_EQ(warnings[0].kind(), warning_kind::kOutOfMemory);
  EXPECT_THAT(Ids(warnings[0].device_ids()), ElementsAre("A"));
  EXPECT_EQ(warnings[1].kind(), warning_kind::kNoMemoryPrediction);
  EXPECT_THAT(Ids(warnings[1].device_ids()), IsEmpty());
  EXPECT_EQ(warnings[1].details(0).text(), "no memory prediction: why");
  EXPECT_EQ(warnings[2].kind(), warning_kind::kBatchScaled);
  EXPECT_THAT(Ids(warnings[2].device_ids()), ElementsAre("A", "C"));
  const v1::Warning& limit = warnings[3];
  EXPECT_EQ(limit.kind(), warning_kind::kHardwareLimit);
  EXPECT_EQ(limit.summary(), WarningSummary(warning_kind::kHardwareLimit));
  EXPECT_THAT(Ids(limit.device_ids()), ElementsAre("A", "B", "C"));
  ASSERT_EQ(limit.details_size(), 2);
  EXPECT_EQ(limit.details(0).text(), "2 operation(s) raised");
  EXPECT_THAT(Ids(limit.details(0).device_ids()), ElementsAre("A", "C"));
  EXPECT_EQ(limit.details(1).text(), "5 operation(s) raised");
  EXPECT_THAT(Ids(limit.details(1).device_ids()), ElementsAre("B"));
  EXPECT_EQ(warnings[4].kind(), "");
  EXPECT_EQ(warnings[4].summary(), "an old warning without a kind");
  EXPECT_THAT(Ids(warnings[4].device_ids()), ElementsAre("B"));
}

// A real Predict: each device warning has a kind, and structured_warnings
// holds every warning of the response exactly once, one entry per kind.
TEST(WarningTallyTest, EveryWarningOfAPredictHasAKindAndIsGroupedOnce) {
  auto devices = DeviceDatabase::LoadFromFile(std::string(HABITAT_DATA_DIR) + "/devices.textproto");
  ASSERT_TRUE(devices.ok()) << devices.status();
  auto trace = testing::LoadKinetoFixture("h100", "resnet50_b16_fp32", 16);
  ASSERT_TRUE(trace.ok()) << trace.status();
  // Without the kernel-varying predictor its operations are carried over
  // unscaled; at batch 32 every GPU is predicted from the scaled trace.
  PredictionEngine engine(&*devices, nullptr);
  PredictionQuery query;
  query.batch_size = 32;
  auto response = engine.Predict(*trace, "", query);
  ASSERT_TRUE(response.ok()) << response.status();
  std::multiset<std::pair<std::string, std::string>> given;  // (text, device)
  for (const v1::DevicePrediction& p : response->predictions()) {
    ASSERT_EQ(p.warning_kinds_size(), p.warnings_size()) << p.device_id();
    for (int i = 0; i < p.warnings_size(); ++i) {
      EXPECT_FALSE(WarningSummary(p.warning_kinds(i)).empty()) << p.warnings(i);
      given.emplace(p.warnings(i), p.device_id());
    }
  }
  for (const std::string& text : response->warnings()) given.emplace(text, "");
  std::multiset<std::pair<std::string, std::string>> grouped;
  std::set<std::string> kinds;
  for (const v1::Warning& w : response->structured_warnings()) {
    EXPECT_TRUE(kinds.insert(w.kind()).second) << w.kind();
    EXPECT_EQ(w.summary(), WarningSummary(w.kind()));
    for (const v1::WarningDetail& d : w.details()) {
      // Response-level warnings name the GPUs they concern; each text once.
      const bool response_level =
          std::find(response->warnings().begin(), response->warnings().end(), d.text()) !=
          response->warnings().end();
      if (response_level) {
        grouped.emplace(d.text(), "");
        continue;
      }
      for (const std::string& id : d.device_ids()) grouped.emplace(d.text(), id);
    }
  }
  EXPECT_EQ(grouped, given);
  EXPECT_TRUE(kinds.count(warning_kind::kUnscaledOperations));
  EXPECT_TRUE(kinds.count(warning_kind::kBatchScaled));
  for (const v1::Warning& w : response->structured_warnings()) {
    if (w.kind() != warning_kind::kBatchScaled) continue;
    EXPECT_EQ(w.device_ids_size(), response->predictions_size());
  }
}

}  // namespace
}  // namespace habitat
