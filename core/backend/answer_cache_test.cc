// The serialised-answer cache: a repeated Predict by trace id is answered
// with the bytes of the first answer, which equal a fresh prediction's, and
// never with an answer something has since changed (catalogs, tenant,
// retention, the request itself).
#include "core/backend/answer_cache.h"

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/file_io.h"
#include "core/backend/prediction_backend.h"
#include "core/testing/trace_fixtures.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

absl::StatusOr<std::unique_ptr<PredictionBackend>> NewBackend(const std::string& data_dir,
                                                              size_t cache_entries,
                                                              TraceStoreOptions store = {}) {
  BackendOptions options;
  options.data_dir = data_dir;
  options.cache_entries = cache_entries;
  return PredictionBackend::Create(options, std::make_unique<InMemoryTraceStore>(store));
}

class AnswerCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto trace = testing::LoadKinetoFixture("h100", "transformer_b32_bf16", 32);
    ASSERT_TRUE(trace.ok()) << trace.status();
    *upload_.mutable_trace() = std::move(*trace);
  }

  // Uploads the trace to `backend`; a request for it on two GPUs.
  v1::PredictRequest RequestFor(PredictionBackend& backend, const RequestContext& context = {}) {
    auto stored = backend.UploadTrace(upload_, context);
    EXPECT_TRUE(stored.ok()) << stored.status();
    v1::PredictRequest request;
    request.set_trace_id(stored.ok() ? stored->trace_id() : "");
    request.add_devices("T4");
    request.add_devices("L4");
    return request;
  }

  v1::UploadTraceRequest upload_;
};

TEST_F(AnswerCacheTest, ARepeatedPredictIsTheCachedBytesOfAFreshAnswer) {
  auto backend = NewBackend(HABITAT_DATA_DIR, 4096);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const v1::PredictRequest request = RequestFor(**backend);
  EXPECT_EQ((*backend)->LookUpAnswer(request, {}).bytes, nullptr);
  auto first = (*backend)->PredictSerialized(request, {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->predictions, 2);

  // Served from the cache: the very same bytes, found without predicting.
  EXPECT_EQ((*backend)->LookUpAnswer(request, {}).bytes, first->bytes);
  PredictionStats stats;
  auto again = (*backend)->PredictSerialized(request, {}, &stats);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->bytes, first->bytes);
  EXPECT_EQ(stats.cache_hits, 2);
  EXPECT_EQ(stats.cache_misses, 0);
  EXPECT_EQ((*backend)->answers().size(), 1u);

  // Byte for byte what a backend without any cache answers.
  auto uncached = NewBackend(HABITAT_DATA_DIR, 0);
  ASSERT_TRUE(uncached.ok()) << uncached.status();
  const v1::PredictRequest same = RequestFor(**uncached);
  auto fresh = (*uncached)->Predict(same);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(*again->bytes, fresh->SerializeAsString());
  EXPECT_EQ((*uncached)->LookUpAnswer(same, {}).bytes, nullptr);
}

TEST_F(AnswerCacheTest, AnotherQuestionIsAnotherAnswer) {
  auto backend = NewBackend(HABITAT_DATA_DIR, 4096);
  ASSERT_TRUE(backend.ok()) << backend.status();
  v1::PredictRequest request = RequestFor(**backend);
  ASSERT_TRUE((*backend)->PredictSerialized(request, {}).ok());
  v1::PredictRequest spot = request;
  spot.set_price_kind(v1::PRICE_KIND_SPOT);
  EXPECT_EQ((*backend)->LookUpAnswer(spot, {}).bytes, nullptr);
  v1::PredictRequest batch = request;
  batch.set_batch_size(64);
  EXPECT_EQ((*backend)->LookUpAnswer(batch, {}).bytes, nullptr);
  // Inline traces are not kept (hashing one costs about what answering does).
  v1::PredictRequest inline_trace = request;
  *inline_trace.mutable_trace() = upload_.trace();
  ASSERT_TRUE((*backend)->PredictSerialized(inline_trace, {}).ok());
  EXPECT_EQ((*backend)->LookUpAnswer(inline_trace, {}).bytes, nullptr);
  EXPECT_EQ((*backend)->answers().size(), 1u);
}

TEST_F(AnswerCacheTest, ATenantGetsOnlyAnswersAboutItsOwnTraces) {
  auto backend = NewBackend(HABITAT_DATA_DIR, 4096);
  ASSERT_TRUE(backend.ok()) << backend.status();
  RequestContext alpha;
  alpha.tenant = "alpha";
  RequestContext beta;
  beta.tenant = "beta";
  const v1::PredictRequest request = RequestFor(**backend, alpha);
  ASSERT_TRUE((*backend)->PredictSerialized(request, alpha).ok());
  EXPECT_NE((*backend)->LookUpAnswer(request, alpha).bytes, nullptr);
  EXPECT_EQ((*backend)->LookUpAnswer(request, beta).bytes, nullptr);
  EXPECT_EQ((*backend)->PredictSerialized(request, beta).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(AnswerCacheTest, ADeletedTraceIsNotFoundAgain) {
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  TraceStoreOptions store;
  store.clock = [&now] { return now; };
  auto backend = NewBackend(HABITAT_DATA_DIR, 4096, store);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const v1::PredictRequest request = RequestFor(**backend);
  ASSERT_TRUE((*backend)->PredictSerialized(request, {}).ok());
  now += absl::Hours(48);
  ASSERT_EQ(*(*backend)->store().DeleteOlderThan(now - absl::Hours(24)), 1u);
  EXPECT_EQ((*backend)->LookUpAnswer(request, {}).bytes, nullptr);
  EXPECT_EQ((*backend)->PredictSerialized(request, {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(AnswerCacheTest, AReloadedCatalogPricesTheNextAnswer) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "answer_cache_data";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy(HABITAT_DATA_DIR, dir, fs::copy_options::recursive);
  auto backend = NewBackend(dir.string(), 4096);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const v1::PredictRequest request = RequestFor(**backend);
  auto before = (*backend)->PredictSerialized(request, {});
  ASSERT_TRUE(before.ok()) << before.status();
  v1::PredictResponse old_answer;
  ASSERT_TRUE(old_answer.ParseFromString(*before->bytes));
  ASSERT_EQ(old_answer.predictions(0).device_id(), "T4");

  // The T4's price doubles in the catalog file; SIGHUP reloads it.
  const std::string aws = (dir / "catalogs" / "aws.textproto").string();
  auto text = ReadFile(aws);
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string doubled = absl::StrReplaceAll(
      *text, {{"on_demand_per_gpu_hour: 0.526\n", "on_demand_per_gpu_hour: 1.052\n"}});
  ASSERT_NE(doubled, *text);
  ASSERT_TRUE(WriteFileAtomically(aws, doubled).ok());
  ASSERT_TRUE((*backend)->ReloadCatalogs().ok());

  EXPECT_EQ((*backend)->LookUpAnswer(request, {}).bytes, nullptr);
  auto after = (*backend)->PredictSerialized(request, {});
  ASSERT_TRUE(after.ok()) << after.status();
  v1::PredictResponse new_answer;
  ASSERT_TRUE(new_answer.ParseFromString(*after->bytes));
  EXPECT_NE(*after->bytes, *before->bytes);
  EXPECT_DOUBLE_EQ(new_answer.predictions(0).price_per_hour(),
                   2 * old_answer.predictions(0).price_per_hour());
  // A broken catalog keeps the ones in force, and their answers.
  ASSERT_TRUE(WriteFileAtomically(aws, "not a catalog {").ok());
  EXPECT_FALSE((*backend)->ReloadCatalogs().ok());
  EXPECT_EQ((*backend)->LookUpAnswer(request, {}).bytes, after->bytes);
  fs::remove_all(dir);
}

// A store behind a network round trip (PostgreSQL): its answers are still
// cached, but never looked up on gRPC's own thread.
class RemoteStore : public InMemoryTraceStore {
 public:
  bool AnswersLocally() const override { return false; }
};

TEST_F(AnswerCacheTest, ARemoteStoreIsNotAskedOnGrpcsThread) {
  BackendOptions options;
  options.data_dir = HABITAT_DATA_DIR;
  auto backend = PredictionBackend::Create(options, std::make_unique<RemoteStore>());
  ASSERT_TRUE(backend.ok()) << backend.status();
  const v1::PredictRequest request = RequestFor(**backend);
  auto first = (*backend)->PredictSerialized(request, {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*backend)->LookUpAnswer(request, {}).bytes, nullptr);
  auto again = (*backend)->PredictSerialized(request, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->bytes, first->bytes);
}

TEST(AnswerCacheBoundsTest, KeepsTheMostRecentWithinItsBounds) {
  AnswerCache cache(2, 1 << 20);
  auto answer = [](size_t size) {
    return CachedAnswer{std::make_shared<const std::string>(size, 'x'), 1};
  };
  cache.Insert("a", answer(10));
  cache.Insert("b", answer(10));
  ASSERT_NE(cache.Lookup("a").bytes, nullptr);  // a is now the most recent
  cache.Insert("c", answer(10));
  EXPECT_EQ(cache.Lookup("b").bytes, nullptr);
  EXPECT_NE(cache.Lookup("a").bytes, nullptr);
  cache.Insert("huge", answer(2 << 20));
  EXPECT_EQ(cache.Lookup("huge").bytes, nullptr);
  EXPECT_EQ(cache.size(), 2u);
  cache.Clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_FALSE(AnswerCache(0, 1 << 20).enabled());
}

}  // namespace
}  // namespace habitat
