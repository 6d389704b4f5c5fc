#include "server/server_metrics.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace habitat {
namespace {

using ::testing::ElementsAre;
using ::testing::IsSupersetOf;

TEST(LatencyBucketsTest, EndAtTheRequestCap) {
  const std::vector<double> at_60s = LatencyBuckets(absl::Seconds(60));
  EXPECT_EQ(at_60s.front(), 0.0001);
  EXPECT_EQ(at_60s.back(), 60.0);
  EXPECT_THAT(at_60s, IsSupersetOf({1.0, 2.5, 5.0, 10.0, 30.0}));
  EXPECT_TRUE(std::is_sorted(at_60s.begin(), at_60s.end()));

  // A cap between two round numbers is its own last bucket.
  const std::vector<double> at_45s = LatencyBuckets(absl::Seconds(45));
  EXPECT_THAT(std::vector<double>(at_45s.end() - 2, at_45s.end()), ElementsAre(30.0, 45.0));

  // No cap: the buckets still reach minutes.
  EXPECT_EQ(LatencyBuckets(absl::ZeroDuration()).back(), 600.0);
  EXPECT_EQ(LatencyBuckets(absl::Milliseconds(50)).back(), 0.05);
}

// A Predict that took 40 s under a 60 s cap is counted below 60 s, not only
// in +Inf, where the old buckets (ending at 2.5 s) put it.
TEST(LatencyBucketsTest, ASlowCallLandsInAFiniteBucket) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, {"H100-SXM"}, absl::Seconds(60));
  metrics.RecordRequest(Rpc::kPredict, absl::StatusCode::kOk, 40.0);
  bool found = false;
  for (const auto& family : registry.Collect()) {
    if (family.name != "habitat_request_duration_seconds") continue;
    for (const auto& metric : family.metric) {
      if (metric.label.empty() || metric.label[0].value != "Predict") continue;
      const auto& buckets = metric.histogram.bucket;
      ASSERT_GE(buckets.size(), 3u);
      const auto& last_finite = buckets[buckets.size() - 2];
      EXPECT_EQ(last_finite.upper_bound, 60.0);
      EXPECT_EQ(last_finite.cumulative_count, 1u);
      EXPECT_EQ(buckets[buckets.size() - 3].cumulative_count, 0u);  // 30 s
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace habitat
