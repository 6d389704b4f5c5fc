// The memory model against the H100 ground truth in
// tests/testdata/batch_memory (each model's peak at b/2, b, 2b and 4b, and
// the largest power-of-two batch that ran before one ran out of memory).
#include "core/predict/memory_prediction.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/testing/trace_fixtures.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace {

namespace v1 = habitat::v1;

v1::Trace TraceWithMemory(uint32_t batch, int64_t start, int64_t peak) {
  v1::Trace trace;
  trace.set_batch_size(batch);
  trace.mutable_memory()->set_allocated_bytes_at_start(start);
  trace.mutable_memory()->set_peak_allocated_bytes(peak);
  trace.mutable_memory()->set_source("recorded");
  return trace;
}

MemoryModel ModelOf(const v1::Trace& trace) {
  auto model = MemoryModelFor(trace);
  EXPECT_TRUE(model.has_value());
  return model.value_or(MemoryModel{});
}

TEST(MemoryPredictionTest, TracesWithoutStartOrPeakHaveNoModelAndSayWhy) {
  std::string why;
  v1::Trace trace;
  trace.set_batch_size(8);
  EXPECT_FALSE(MemoryModelFor(trace, &why).has_value());
  EXPECT_NE(why.find("no memory data"), std::string::npos) << why;
  // A Kineto import whose first memory event lacks "Bytes" knows the peak only.
  trace.mutable_memory()->set_peak_allocated_bytes(1 << 30);
  trace.mutable_memory()->set_source("kineto");
  EXPECT_FALSE(MemoryModelFor(trace, &why).has_value());
  EXPECT_NE(why.find("when the iteration began"), std::string::npos) << why;
  v1::Trace no_batch = TraceWithMemory(0, 100, 200);
  EXPECT_FALSE(MemoryModelFor(no_batch, &why).has_value());
}

TEST(MemoryPredictionTest, StartStaysAndTheRestScalesWithTheBatch) {
  const MemoryModel model = ModelOf(TraceWithMemory(16, 1000, 3000));
  EXPECT_EQ(PredictPeakBytes(model, 16), 3000);
  EXPECT_EQ(PredictPeakBytes(model, 64), 1000 + 4 * 2000);
  EXPECT_EQ(PredictPeakBytes(model, 8), 1000 + 1000);
  EXPECT_DOUBLE_EQ(MemoryErrorPercent(model, 16), 0);
  EXPECT_DOUBLE_EQ(MemoryErrorPercent(model, 64), 2 * kMemoryErrorPercentPerDoubling);
  // A peak recorded below the start leaves nothing to scale.
  const MemoryModel freed = ModelOf(TraceWithMemory(16, 5000, 4000));
  EXPECT_EQ(PredictPeakBytes(freed, 1024), 5000);
}

TEST(MemoryPredictionTest, UsableMemoryIsTheDriversTotalLessTheContext) {
  v1::DeviceSpec spec;
  spec.set_memory_bytes(int64_t{80} << 30);
  spec.set_driver_memory_bytes(85017493504);
  EXPECT_EQ(UsableMemoryBytes(spec), 85017493504 - kCudaContextReserveBytes);
  spec.clear_driver_memory_bytes();
  EXPECT_EQ(UsableMemoryBytes(spec),
            std::llround(static_cast<double>(int64_t{80} << 30) * kDefaultDriverMemoryShare) -
                kCudaContextReserveBytes);
  spec.set_memory_bytes(1 << 20);  // less than the context
  EXPECT_EQ(UsableMemoryBytes(spec), 0);
}

TEST(MemoryPredictionTest, LargestBatchIsOnTheGridAndTheNextStepDoesNotFit) {
  const MemoryModel model = ModelOf(TraceWithMemory(32, int64_t{2} << 30, int64_t{6} << 30));
  const int64_t usable = int64_t{40} << 30;
  const uint32_t power = LargestFittingBatch(model, usable, 0);
  ASSERT_GT(power, 0u);
  EXPECT_EQ(power & (power - 1), 0u) << power;
  EXPECT_TRUE(FitsMemory(model, power, usable));
  EXPECT_FALSE(FitsMemory(model, power * 2, usable));
  const uint32_t stepped = LargestFittingBatch(model, usable, 24);
  EXPECT_EQ(stepped % 24, 0u);
  EXPECT_TRUE(FitsMemory(model, stepped, usable));
  EXPECT_FALSE(FitsMemory(model, stepped + 24, usable));
  EXPECT_GE(stepped, power);
  // Nothing fits a GPU smaller than the weights.
  EXPECT_EQ(LargestFittingBatch(model, int64_t{1} << 30, 0), 0u);
  // The grid stops 256 times from the traced batch either way.
  const MemoryModel tiny = ModelOf(TraceWithMemory(4, 0, 1000));
  EXPECT_EQ(LargestFittingBatch(tiny, usable, 0), 1024u);
  EXPECT_EQ(LargestFittingBatch(tiny, usable, 3), 1023u);
  const MemoryModel large = ModelOf(TraceWithMemory(2048, 0, int64_t{64} << 30));
  EXPECT_EQ(LargestFittingBatch(large, int64_t{1} << 20, 0), 0u);  // 8 is the smallest
  EXPECT_EQ(LargestFittingBatch(large, int64_t{1} << 30, 0), 16u);
}

struct Case {
  uint32_t batch;
  int64_t start;
  int64_t peak;
};

// Per "model/precision": the measured cases in batch order, and the largest
// power-of-two multiple of the first fixture batch that ran.
struct GroundTruth {
  int64_t total_memory = 0;
  std::map<std::string, std::vector<Case>> cases;
  std::map<std::string, uint32_t> largest;
};

GroundTruth LoadGroundTruth() {
  GroundTruth truth;
  auto loaded = testing::LoadBatchMemory("h100");
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return truth;
  const nlohmann::json& doc = *loaded;
  truth.total_memory = doc.at("total_memory_bytes").get<int64_t>();
  for (const auto& c : doc.at("cases")) {
    const std::string key =
        c.at("model").get<std::string>() + "/" + c.at("precision").get<std::string>();
    truth.cases[key].push_back({c.at("batch").get<uint32_t>(),
                                c.at("allocated_between_iterations_bytes").get<int64_t>(),
                                c.at("peak_allocated_bytes").get<int64_t>()});
  }
  for (auto& [key, cases] : truth.cases) {
    std::sort(cases.begin(), cases.end(),
              [](const Case& a, const Case& b) { return a.batch < b.batch; });
  }
  for (const auto& l : doc.at("largest")) {
    const std::string key =
        l.at("model").get<std::string>() + "/" + l.at("precision").get<std::string>();
    truth.largest[key] = l.at("largest_fitting_batch").get<uint32_t>();
  }
  return truth;
}

// Traced at b (the second batch), predicted at b/2, 2b and 4b.
TEST(MemoryPredictionTest, PeaksOfTheH100FixturesFromOneBatch) {
  const GroundTruth truth = LoadGroundTruth();
  ASSERT_EQ(truth.cases.size(), 14u);
  double sum = 0;
  int n = 0;
  for (const auto& [key, cases] : truth.cases) {
    ASSERT_EQ(cases.size(), 4u) << key;
    const Case& traced = cases[1];
    const MemoryModel model = ModelOf(TraceWithMemory(traced.batch, traced.start, traced.peak));
    for (const Case& c : cases) {
      if (c.batch == traced.batch) continue;
      const double error =
          std::abs(static_cast<double>(PredictPeakBytes(model, c.batch) - c.peak)) / c.peak * 100;
      EXPECT_LT(error, 15) << key << " at batch " << c.batch;
      sum += error;
      ++n;
    }
  }
  EXPECT_LT(sum / n, 5.5) << "MAPE over " << n << " cases";
}

// The largest power-of-two batch predicted to fit an H100 never ran out of
// memory there, and is the measured one for most models.
TEST(MemoryPredictionTest, LargestBatchThatFitsTheH100NeverRunsOutOfMemory) {
  const GroundTruth truth = LoadGroundTruth();
  ASSERT_EQ(truth.largest.size(), 14u);
  v1::DeviceSpec h100;
  h100.set_memory_bytes(int64_t{80} << 30);
  h100.set_driver_memory_bytes(truth.total_memory);
  int exact = 0;
  for (const auto& [key, measured] : truth.largest) {
    const Case& traced = truth.cases.at(key)[1];
    const MemoryModel model = ModelOf(TraceWithMemory(traced.batch, traced.start, traced.peak));
    const uint32_t predicted = LargestFittingBatch(model, UsableMemoryBytes(h100), 0);
    EXPECT_LE(predicted, measured) << key;
    EXPECT_GE(predicted * 4, measured) << key;
    exact += predicted == measured;
  }
  EXPECT_GE(exact, 10);
}

}  // namespace
}  // namespace habitat
