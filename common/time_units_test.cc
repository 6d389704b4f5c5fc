#include "common/time_units.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace habitat {
namespace {

constexpr Nanoseconds kMax = std::numeric_limits<Nanoseconds>::max();

TEST(SaturatingRoundTest, RoundsToNearest) {
  EXPECT_EQ(SaturatingRound(1.4), 1);
  EXPECT_EQ(SaturatingRound(1.5), 2);
  EXPECT_EQ(SaturatingRound(1e12), 1'000'000'000'000);
}

TEST(SaturatingRoundTest, NegativeTimesAreZero) {
  EXPECT_EQ(SaturatingRound(-3.0), 0);
  EXPECT_EQ(SaturatingRound(-std::numeric_limits<double>::infinity()), 0);
}

TEST(SaturatingRoundTest, BeyondInt64AndNaNSaturate) {
  EXPECT_EQ(SaturatingRound(1e30), kMax);
  EXPECT_EQ(SaturatingRound(std::numeric_limits<double>::infinity()), kMax);
  EXPECT_EQ(SaturatingRound(std::nan("")), kMax);
}

TEST(SaturatingAddTest, AddsAndSaturates) {
  EXPECT_EQ(SaturatingAdd(2, 3), 5);
  EXPECT_EQ(SaturatingAdd(kMax - 1, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMax, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMax, kMax), kMax);
}

}  // namespace
}  // namespace habitat
