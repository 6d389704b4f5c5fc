// Retention on a real SQLite store with an injected clock: the start-up
// sweep, the periodic sweeps, and a failing store.
#include "server/persistence/trace_retention.h"

#include "absl/time/clock.h"
#include "core/store/trace_store_conformance.h"
#include "gtest/gtest.h"
#include "server/persistence/sqlite_trace_store.h"

namespace habitat::testing {
namespace {

constexpr absl::Duration kDay = absl::Hours(24);

// Polls `done` for up to 10 s.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 1000 && !done(); ++i) absl::SleepFor(absl::Milliseconds(10));
  return done();
}

TEST(TraceRetentionTest, SweepsAtStartAndThenPeriodically) {
  ScratchDir dir;
  FakeClock clock(absl::FromUnixSeconds(1'700'000'000));
  TraceStoreOptions options;
  options.clock = clock.AsClock();
  auto store = SqliteTraceStore::Open(dir.path() + "/traces.db", options);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<v1::Trace> traces = RealTraces(3);
  const std::string oldest = (*store)->Put("", traces[0])->id;  // day 0
  clock.Advance(20 * kDay);
  const std::string middle = (*store)->Put("alpha", traces[1])->id;  // day 20
  clock.Advance(20 * kDay);
  const std::string newest = (*store)->Put("", traces[2])->id;  // day 40

  // Started on day 40 with 30 days: the day-0 trace goes before Start returns.
  RetentionOptions retention_options;
  retention_options.days = 30;
  retention_options.interval = absl::Milliseconds(20);
  retention_options.clock = clock.AsClock();
  auto retention = TraceRetention::Start(store->get(), retention_options);
  ASSERT_TRUE(retention.ok()) << retention.status();
  EXPECT_EQ((*retention)->deleted(), 1u);
  EXPECT_EQ((*store)->Get("", oldest).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*store)->Get("alpha", middle).ok());

  // Day 55: the next periodic sweep takes the day-20 trace, not day 40's.
  clock.Advance(15 * kDay);
  ASSERT_TRUE(Eventually([&] { return (*retention)->deleted() == 2; }));
  EXPECT_EQ((*store)->Get("alpha", middle).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*store)->Get("", newest).ok());
  const int sweeps = (*retention)->sweeps();
  ASSERT_TRUE(Eventually([&] { return (*retention)->sweeps() > sweeps + 2; }));
  EXPECT_EQ((*retention)->deleted(), 2u);
  EXPECT_EQ((*store)->Count().value_or(99), 1u);
}

// A store whose deletes fail: the failure at start is the caller's error;
// later failures are logged and retried, not fatal.
class FailingStore : public InMemoryTraceStore {
 public:
  absl::StatusOr<size_t> DeleteOlderThan(absl::Time cutoff) override {
    if (fail_.load()) return absl::UnavailableError("database is down");
    return InMemoryTraceStore::DeleteOlderThan(cutoff);
  }
  std::atomic<bool> fail_{false};
};

TEST(TraceRetentionTest, StoreErrorsFailTheStartAndAreRetriedLater) {
  FailingStore store;
  RetentionOptions options;
  options.days = 1;
  options.interval = absl::Milliseconds(10);
  store.fail_ = true;
  auto refused = TraceRetention::Start(&store, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("trace retention at start-up"), std::string::npos);

  store.fail_ = false;
  auto retention = TraceRetention::Start(&store, options);
  ASSERT_TRUE(retention.ok()) << retention.status();
  store.fail_ = true;
  absl::SleepFor(absl::Milliseconds(100));  // several failing sweeps
  const int before = (*retention)->sweeps();
  store.fail_ = false;
  EXPECT_TRUE(Eventually([&] { return (*retention)->sweeps() > before; }));
}

TEST(TraceRetentionTest, RefusesNonPositiveDays) {
  InMemoryTraceStore store;
  RetentionOptions options;
  options.days = 0;
  EXPECT_EQ(TraceRetention::Start(&store, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.days = -3;
  EXPECT_EQ(TraceRetention::Start(&store, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace habitat::testing
