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
  cache.Insert("t", "C", Prediction(3));            // evicts B
  EXPECT_NE(cache.Lookup("t", "A").full, nullptr);
  EXPECT_EQ(cache.Lookup("t", "B").full, nullptr);
  EXPECT_NE(cache.Lookup("t", "C").full, nullptr);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(PredictionCacheTest, ZeroCapacityKeepsNothing) {
  PredictionCache cache(0);
  cache.Insert("t", "A", Prediction(1));
  EXPECT_EQ(cache.Lookup("t", "A").full, nullptr);
  PredictionCache no_bytes(10, 0);
  no_bytes.Insert("t", "A", Prediction(1));
  EXPECT_EQ(no_bytes.Lookup("t", "A").full, nullptr);
}

// A prediction with a per-operation breakdown of `operations` named ops.
CachedPrediction WithBreakdown(int operations) {
  auto full = std::make_shared<v1::DevicePrediction>();
  for (int i = 0; i < operations; ++i) {
    full->add_operations()->set_name(std::string(100, 'n'));
  }
  return {full, std::make_shared<v1::DevicePrediction>()};
}

// Bounded in entries only, one 56 MiB inline Predict left ~2.4 GB
// resident: the byte budget evicts by size, and an entry larger than the
// whole budget is not kept at all.
TEST(PredictionCacheTest, BoundedInBytes) {
  const size_t one = [] {
    PredictionCache probe(10, size_t{1} << 30);
    probe.Insert("t", "A", WithBreakdown(1000));
    return probe.bytes();
  }();
  ASSERT_GT(one, 1000u * 100);
  PredictionCache cache(100, 2 * one + one / 2);
  cache.Insert("t", "A", WithBreakdown(1000));
  cache.Insert("t", "B", WithBreakdown(1000));
  EXPECT_EQ(cache.bytes(), 2 * one);
  cache.Insert("t", "C", WithBreakdown(1000));  // evicts A, the least recent
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_LE(cache.bytes(), 2 * one + one / 2);
  EXPECT_EQ(cache.Lookup("t", "A").full, nullptr);
  EXPECT_NE(cache.Lookup("t", "C").full, nullptr);

  cache.Insert("t", "huge", WithBreakdown(10000));  // above the budget alone
  EXPECT_EQ(cache.Lookup("t", "huge").full, nullptr);
  EXPECT_NE(cache.Lookup("t", "C").full, nullptr);

  cache.Insert("t", "C", Prediction(1));  // replacing gives the bytes back
  EXPECT_LT(cache.bytes(), one + one / 2);
}

}  // namespace
}  // namespace habitat
