#include "core/predict/prediction_cache.h"

#include "gtest/gtest.h"

namespace habitat {
namespace {

CachedPrediction Prediction(int64_t ns) {
  auto p = std::make_shared<v1::DevicePrediction>();
  p->set_gpu_time_ns(ns);
  return {p, p};
}

TEST(PredictionCacheTest, HitsAfterInsert) {
  PredictionCache cache(2);
  EXPECT_EQ(cache.Lookup("t", "A").full, nullptr);
  cache.Insert("t", "A", Prediction(1));
  ASSERT_NE(cache.Lookup("t", "A").full, nullptr);
  EXPECT_EQ(cache.Lookup("t", "A").full->gpu_time_ns(), 1);
  EXPECT_EQ(cache.Lookup("u", "A").full, nullptr);
}

TEST(PredictionCacheTest, EvictsLeastRecentlyUsed) {
  PredictionCache cache(2);
  cache.Insert("t", "A", Prediction(1));
  cache.Insert("t", "B", Prediction(2));
  ASSERT_NE(cache.Lookup("t", "A").full, nullptr);  // A is now most recent
  cache.Insert("t", "C", Prediction(3));       // evicts B
  EXPECT_NE(cache.Lookup("t", "A").full, nullptr);
  EXPECT_EQ(cache.Lookup("t", "B").full, nullptr);
  EXPECT_NE(cache.Lookup("t", "C").full, nullptr);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(PredictionCacheTest, ZeroCapacityKeepsNothing) {
  PredictionCache cache(0);
  cache.Insert("t", "A", Prediction(1));
  EXPECT_EQ(cache.Lookup("t", "A").full, nullptr);
}

}  // namespace
}  // namespace habitat
