#include "core/store/trace_store_conformance.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "core/testing/trace_fixtures.h"
#include "core/trace/trace_id.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"

namespace habitat::testing {

std::vector<v1::Trace> RealTraces(int count) {
  static const std::vector<v1::Trace>* base = [] {
    auto* traces = new std::vector<v1::Trace>;
    for (const auto& [name, batch] :
         {std::pair<const char*, uint32_t>{"dcgan_b64_fp32", 64}, {"resnet50_b16_fp32", 16}}) {
      auto trace = LoadKinetoFixture("h100", name, batch);
      EXPECT_TRUE(trace.ok()) << trace.status();
      if (trace.ok()) traces->push_back(*std::move(trace));
    }
    return traces;
  }();
  std::vector<v1::Trace> traces;
  for (int k = 0; static_cast<int>(traces.size()) < count && !base->empty(); ++k) {
    for (const auto& trace : *base) {
      if (static_cast<int>(traces.size()) == count) break;
      traces.push_back(trace);
      (*traces.back().mutable_metadata())["store_test_copy"] = absl::StrCat(k);
    }
  }
  return traces;
}

bool SameTrace(const v1::Trace& a, const v1::Trace& b) {
  // Map fields serialise in no fixed order: compare as messages.
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

namespace {

std::string IdOf(const v1::Trace& trace) {
  auto id = ComputeTraceId(trace);
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : "";
}

TEST_P(TraceStoreConformanceTest, StoresATraceOnceUnderItsContentAddress) {
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status();
  const v1::Trace trace = RealTraces(1)[0];
  auto first = (*store)->Put("", trace);
  auto second = (*store)->Put("", trace);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(first->created);
  EXPECT_FALSE(second->created);
  EXPECT_EQ(first->id, IdOf(trace));
  EXPECT_EQ(second->id, first->id);
  auto got = (*store)->Get("", first->id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(SameTrace(**got, trace));
  EXPECT_EQ((*store)->Count().value_or(99), 1u);
  const std::string unknown = "sha256:" + std::string(64, '0');
  EXPECT_EQ((*store)->Get("", unknown).status(), TraceNotFoundError(unknown));
}

TEST_P(TraceStoreConformanceTest, TenantsSeeOnlyTheirOwnTraces) {
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status();
  const v1::Trace trace = RealTraces(1)[0];
  auto stored = (*store)->Put("alpha", trace);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_TRUE((*store)->Get("alpha", stored->id).ok());
  // The same answer as for an id nobody stored: no hint that it exists.
  EXPECT_EQ((*store)->Get("beta", stored->id).status(), TraceNotFoundError(stored->id));
  EXPECT_EQ((*store)->Get("", stored->id).status(), TraceNotFoundError(stored->id));
  // Another tenant uploading the same trace gets its own copy.
  auto beta = (*store)->Put("beta", trace);
  ASSERT_TRUE(beta.ok()) << beta.status();
  EXPECT_TRUE(beta->created);
  EXPECT_EQ(beta->id, stored->id);
  EXPECT_TRUE((*store)->Get("beta", stored->id).ok());
  EXPECT_EQ((*store)->Count().value_or(99), 2u);
}

TEST_P(TraceStoreConformanceTest, RejectsMalformedIdsAndUnusableTenants) {
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Get("", "../../etc/passwd").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Get("", "sha256:" + std::string(64, 'G')).status().code(),
            absl::StatusCode::kInvalidArgument);
  const v1::Trace trace = RealTraces(1)[0];
  EXPECT_EQ((*store)->Put("../escape", trace).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ((*store)->Get("a/b", IdOf(trace)).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ((*store)->Count().value_or(99), 0u);
}

TEST_P(TraceStoreConformanceTest, KeepsEverythingAcrossAReopen) {
  if (!location_->persistent()) GTEST_SKIP() << "this store keeps nothing across a restart";
  const std::vector<v1::Trace> traces = RealTraces(3);
  const std::string tenants[] = {"", "alpha", "beta"};
  std::vector<std::string> ids;
  {
    auto store = Open();
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < 3; ++i) {
      auto stored = (*store)->Put(tenants[i], traces[i]);
      ASSERT_TRUE(stored.ok()) << stored.status();
      ids.push_back(stored->id);
    }
  }
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Count().value_or(99), 3u);
  for (int i = 0; i < 3; ++i) {
    auto got = (*store)->Get(tenants[i], ids[i]);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(SameTrace(**got, traces[i]));
    auto again = (*store)->Put(tenants[i], traces[i]);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_FALSE(again->created);
  }
}

TEST_P(TraceStoreConformanceTest, RetentionDeletesOnlyTracesOlderThanTheCutoff) {
  FakeClock clock(absl::FromUnixSeconds(1'700'000'000));
  TraceStoreOptions options;
  options.clock = clock.AsClock();
  auto store = Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<v1::Trace> traces = RealTraces(3);
  auto old_alpha = (*store)->Put("alpha", traces[0]);
  auto old_anonymous = (*store)->Put("", traces[1]);
  ASSERT_TRUE(old_alpha.ok() && old_anonymous.ok());
  clock.Advance(absl::Hours(24 * 10));
  auto young = (*store)->Put("alpha", traces[2]);
  ASSERT_TRUE(young.ok()) << young.status();
  // Read once, so that stores with a cache have it cached.
  ASSERT_TRUE((*store)->Get("alpha", old_alpha->id).ok());

  const absl::Time start = clock.Now() - absl::Hours(24 * 10);
  auto none = (*store)->DeleteOlderThan(start);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, 0u);
  auto deleted = (*store)->DeleteOlderThan(start + absl::Hours(24 * 5));
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2u);
  EXPECT_EQ((*store)->Get("alpha", old_alpha->id).status(), TraceNotFoundError(old_alpha->id));
  EXPECT_EQ((*store)->Get("", old_anonymous->id).status(), TraceNotFoundError(old_anonymous->id));
  EXPECT_TRUE((*store)->Get("alpha", young->id).ok());
  EXPECT_EQ((*store)->Count().value_or(99), 1u);
  // Uploaded again, it is a new trace with a new creation time.
  auto again = (*store)->Put("alpha", traces[0]);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->created);
  EXPECT_EQ((*store)->DeleteOlderThan(start + absl::Hours(24 * 5)).value_or(99), 0u);
}

TEST_P(TraceStoreConformanceTest, TenantQuotaBoundsTheTracesOfEachTenant) {
  TraceStoreOptions options;
  options.quota = {.max_traces = 2, .max_bytes = 0};
  auto store = Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<v1::Trace> traces = RealTraces(3);
  for (const std::string tenant : {"", "alpha"}) {
    ASSERT_TRUE((*store)->Put(tenant, traces[0]).ok());
    ASSERT_TRUE((*store)->Put(tenant, traces[1]).ok());
    auto full = (*store)->Put(tenant, traces[2]);
    EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
    EXPECT_THAT(std::string(full.status().message()),
                ::testing::HasSubstr("quota for this tenant is full: 2 traces"));
    // What it has already needs no room.
    auto again = (*store)->Put(tenant, traces[0]);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_FALSE(again->created);
  }
  // One tenant's full quota leaves another's alone.
  EXPECT_TRUE((*store)->Put("beta", traces[2]).ok());
  EXPECT_EQ((*store)->Count().value_or(99), 5u);
  // Retention makes room.
  EXPECT_EQ((*store)->DeleteOlderThan(absl::InfiniteFuture()).value_or(0), 5u);
  EXPECT_TRUE((*store)->Put("alpha", traces[2]).ok());
}

TEST_P(TraceStoreConformanceTest, TenantQuotaBoundsTheBytesOfEachTenant) {
  const std::vector<v1::Trace> traces = RealTraces(3);
  TraceStoreOptions options;
  options.quota = {
      .max_traces = 0,
      .max_bytes = static_cast<int64_t>(traces[0].ByteSizeLong() + traces[1].ByteSizeLong())};
  auto store = Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Put("alpha", traces[0]).ok());
  ASSERT_TRUE((*store)->Put("alpha", traces[1]).ok());  // exactly full
  auto full = (*store)->Put("alpha", traces[2]);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  EXPECT_THAT(std::string(full.status().message()), ::testing::HasSubstr("MiB) stored"));
  EXPECT_TRUE((*store)->Put("beta", traces[2]).ok());
  EXPECT_EQ((*store)->Count().value_or(99), 3u);
}

TEST_P(TraceStoreConformanceTest, ConcurrentUploadsOfTheSameTracesStoreEachOnce) {
  auto store = Open();
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<v1::Trace> traces = RealTraces(6);
  constexpr int kThreads = 12;
  std::atomic<int> created{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string tenant = t % 2 == 0 ? "even" : "odd";
      for (int i = 0; i < static_cast<int>(traces.size()); ++i) {
        const v1::Trace& trace = traces[(i + t) % traces.size()];
        auto stored = (*store)->Put(tenant, trace);
        if (!stored.ok()) {
          ADD_FAILURE() << stored.status();
          ++failures;
          continue;
        }
        created += stored->created ? 1 : 0;
        auto got = (*store)->Get(tenant, stored->id);
        if (!got.ok() || !SameTrace(**got, trace)) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  // Each trace once per tenant, however the uploads interleaved.
  EXPECT_EQ(created.load(), 2 * static_cast<int>(traces.size()));
  EXPECT_EQ((*store)->Count().value_or(99), 2 * traces.size());
}

}  // namespace
}  // namespace habitat::testing
