// The Kineto importer without a measured wall time: the profiler's
// estimated cost taken out of every committed fixture's host timeline, and
// the origin's wall time against the same model's unprofiled one
// (docs/profiled_wall_time.md).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/testing/kineto_fixtures.h"
#include "gtest/gtest.h"
#include "habitat/v1/trace.pb.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace {

using habitat::v1::Operation;
using habitat::v1::Trace;
using nlohmann::json;
using testing::Fixture;
using testing::ListFixtures;
using testing::LoadFixture;
using testing::Measurement;
using testing::MetaInt;

// Without a measured wall time the importer takes the profiler's estimated
// cost out of the host timeline (core/kineto/profiler_cost.h) and replays
// the origin for iteration_wall_ns.
TEST(KinetoProfiledWallTest, RemovesTheProfilersCostFromEveryFixture) {
  ASSERT_FALSE(ListFixtures().empty());
  for (const Fixture& f : ListFixtures()) {
    SCOPED_TRACE(f.gpu + "/" + f.name);
    const Trace& trace = LoadFixture(f).trace;
    const auto& meta = trace.metadata();
    ASSERT_EQ(meta.count("kineto.host_timeline"), 1u);
    ASSERT_EQ(meta.at("kineto.host_timeline"), "profiler cost removed")
        << (meta.count("kineto.host_timeline_why") ? meta.at("kineto.host_timeline_why") : "");
    const int64_t profiled = MetaInt(trace, "kineto.profiled_step_ns");
    const int64_t removed = MetaInt(trace, "kineto.profiler_cost_ns");
    EXPECT_GT(removed, 0);
    EXPECT_LT(removed, profiled);
    EXPECT_GT(MetaInt(trace, "kineto.sibling_gap_ns"), 0);
    // Never faster than its own GPU work, and the host runs no longer than
    // the profiled step less what was taken out.
    EXPECT_GE(trace.iteration_wall_ns(), trace.iteration_gpu_busy_ns());
    for (const Operation& op : trace.operations()) {
      EXPECT_GE(op.cpu_duration_ns(), 0);
      EXPECT_LE(op.cpu_start_ns() + op.cpu_duration_ns(), profiled - removed + 1) << op.name();
    }
  }
}

// The origin's wall time without --wall-ns against the same model's
// unprofiled wall time (tests/testdata/measurements/<gpu>.json), over
// every fixture of one GPU. The cost model's constants were measured on the
// lent H200 with microbenchmarks, not fitted to these fixtures; the H100
// captures are from another host. docs/profiled_wall_time.md has the table.
// Before the correction: H200 6 of 28 within 10 % (median 34 %), H100 5 of
// 28 (median 45 %).
void ExpectUnprofiledWallTimes(const std::string& gpu, int at_least_within_10pct,
                               double median_at_most) {
  std::vector<double> errors;
  for (const Fixture& f : ListFixtures()) {
    if (f.gpu != gpu) continue;
    const json measured = Measurement(f);
    ASSERT_TRUE(measured.is_object()) << f.name;
    const Trace& trace = LoadFixture(f).trace;
    const double unprofiled = measured["wall_ns_median"].get<double>();
    errors.push_back(std::abs(trace.iteration_wall_ns() / unprofiled - 1));
  }
  ASSERT_EQ(errors.size(), 28u);
  std::sort(errors.begin(), errors.end());
  const int within =
      std::count_if(errors.begin(), errors.end(), [](double e) { return e <= 0.10; });
  EXPECT_GE(within, at_least_within_10pct) << gpu;
  EXPECT_LE(0.5 * (errors[13] + errors[14]), median_at_most) << gpu;
}

TEST(KinetoProfiledWallTest, H200FixturesComeCloseToTheirUnprofiledWallTimes) {
  ExpectUnprofiledWallTimes("h200", 18, 0.08);  // 19 of 28, median 6.5 %
}

TEST(KinetoProfiledWallTest, HeldOutH100FixturesComeCloseToTheirUnprofiledWallTimes) {
  ExpectUnprofiledWallTimes("h100", 16, 0.08);  // 17 of 28, median 7.0 %
}

TEST(KinetoProfiledWallTest, Gpt2Bf16OnTheH200IsWithinTenPercentOfUnprofiled) {
  // Host-bound (GPU busy 18.0 of 28.2 ms unprofiled); the profiled step took
  // 41.7 ms, which before the correction was its wall time (+48 %).
  const Fixture f{"h200", "gpt2_b8_bf16",
                  std::string(HABITAT_TESTDATA_DIR) + "/kineto/h200/gpt2_b8_bf16.json.gz"};
  const Trace& trace = LoadFixture(f).trace;
  const int64_t unprofiled = Measurement(f)["wall_ns_median"].get<int64_t>();
  EXPECT_NEAR(trace.iteration_wall_ns(), unprofiled, 0.10 * unprofiled);
  EXPECT_GT(MetaInt(trace, "kineto.profiled_step_ns"), 1.4 * unprofiled);
}

}  // namespace
}  // namespace habitat
