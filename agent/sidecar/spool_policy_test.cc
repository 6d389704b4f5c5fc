// Backoff, error classes and spool-file parsing.
#include <cstdint>
#include <random>

#include "absl/strings/str_cat.h"
#include "agent/sidecar/spool.h"
#include "agent/sidecar/spool_test_support.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/kineto_fixtures.h"

namespace habitat::agent {
namespace {

using ::testing::HasSubstr;

TEST(BackoffTest, DoublesUpToTheCapWithJitterInTheUpperHalf) {
  BackoffPolicy policy{absl::Milliseconds(100), absl::Seconds(2)};
  absl::BitGen random;
  for (int failures = 1; failures <= 40; ++failures) {
    absl::Duration nominal = absl::Milliseconds(100);
    for (int i = 1; i < failures && nominal < policy.max; ++i) nominal *= 2;
    nominal = std::min(nominal, policy.max);
    for (int draw = 0; draw < 50; ++draw) {
      const absl::Duration d = BackoffDelay(policy, failures, random);
      EXPECT_GE(d, nominal / 2) << failures;
      EXPECT_LE(d, nominal) << failures;
    }
  }
  // Huge failure counts stay at the cap (no overflow).
  EXPECT_LE(BackoffDelay(policy, 1 << 30, random), policy.max);
}

TEST(BackoffTest, JitterSpreadsRetries) {
  BackoffPolicy policy{absl::Seconds(1), absl::Seconds(30)};
  absl::BitGen random;
  absl::Duration low = absl::InfiniteDuration(), high = absl::ZeroDuration();
  for (int i = 0; i < 200; ++i) {
    const absl::Duration d = BackoffDelay(policy, 6, random);
    low = std::min(low, d);
    high = std::max(high, d);
  }
  // 200 draws from [15 s, 30 s]: spread over most of the interval.
  EXPECT_LT(low, absl::Seconds(18));
  EXPECT_GT(high, absl::Seconds(27));
}

TEST(ClassifyTest, PermanentServerDownAndRetryable) {
  EXPECT_EQ(ClassifyUploadError(absl::InvalidArgumentError("")), ErrorClass::kPermanent);
  EXPECT_EQ(ClassifyUploadError(absl::NotFoundError("")), ErrorClass::kPermanent);
  EXPECT_EQ(ClassifyUploadError(absl::OutOfRangeError("")), ErrorClass::kPermanent);
  EXPECT_EQ(ClassifyUploadError(absl::UnavailableError("")), ErrorClass::kServerDown);
  EXPECT_EQ(ClassifyUploadError(absl::DeadlineExceededError("")), ErrorClass::kServerDown);
  EXPECT_EQ(ClassifyUploadError(absl::ResourceExhaustedError("")), ErrorClass::kRetryFile);
  EXPECT_EQ(ClassifyUploadError(absl::InternalError("")), ErrorClass::kRetryFile);
  EXPECT_EQ(ClassifyUploadError(absl::UnauthenticatedError("")), ErrorClass::kRetryFile);
  EXPECT_EQ(ClassifyUploadError(absl::UnknownError("")), ErrorClass::kRetryFile);
}

class ParseSpoolTraceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto traces = ::habitat::testing::LoadFixtureTraces(1);
    ASSERT_TRUE(traces.ok()) << traces.status();
    trace_ = new v1::Trace((*traces)[0]);
    ASSERT_TRUE(trace_->SerializeToString(&bytes_));
  }
  static void TearDownTestSuite() { delete trace_; }
  static v1::Trace* trace_;
  static std::string bytes_;
};
v1::Trace* ParseSpoolTraceTest::trace_ = nullptr;
std::string ParseSpoolTraceTest::bytes_;

TEST_F(ParseSpoolTraceTest, BinaryAndGzip) {
  // Compared by content id: plain serialisation orders map entries freely.
  auto plain = ParseSpoolTrace("t.trace", bytes_);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(testing::IdOf(*plain), testing::IdOf(*trace_));
  auto gz = Gzip(bytes_);
  ASSERT_TRUE(gz.ok());
  auto inflated = ParseSpoolTrace("t.trace", *gz);
  ASSERT_TRUE(inflated.ok()) << inflated.status();
  EXPECT_EQ(testing::IdOf(*inflated), testing::IdOf(*trace_));
}

TEST_F(ParseSpoolTraceTest, BadFilesSayWhatTheyAre) {
  EXPECT_THAT(ParseSpoolTrace("e.trace", "").status().message(), HasSubstr("'e.trace' is empty"));
  EXPECT_THAT(ParseSpoolTrace("j.trace", " \n{\"traceEvents\": []}").status().message(),
              HasSubstr("is JSON"));
  EXPECT_THAT(ParseSpoolTrace("b.trace", "\xEF\xBB\xBF{\"traceEvents\": []}").status().message(),
              HasSubstr("is JSON"));
  auto gz = Gzip(bytes_);
  ASSERT_TRUE(gz.ok());
  const auto cut_gz = ParseSpoolTrace("g.trace", gz->substr(0, gz->size() / 2));
  EXPECT_EQ(cut_gz.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cut_gz.status().message(), HasSubstr("'g.trace' is gzip data that does not inflate"));
  // Cut inside the last field (a length-delimited one), the binary cannot parse.
  const auto cut = ParseSpoolTrace("c.trace", bytes_.substr(0, bytes_.size() - 3));
  EXPECT_THAT(cut.status().message(), HasSubstr("does not parse as a habitat.v1.Trace"));
  EXPECT_THAT(cut.status().message(), HasSubstr("'c.trace'"));
  // ELF header bytes: a binary someone dropped into the spool.
  const std::string elf(
      "\x7f"
      "ELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00",
      16);
  EXPECT_EQ(ParseSpoolTrace("elf.trace", elf).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ParseSpoolTraceTest, ContentOverTheLimitIsRefusedWithoutInflatingItAll) {
  // 64 MiB of zeros gzip to ~64 KiB: inflation must stop at the limit.
  auto bomb = Gzip(std::string(64 << 20, '\0'));
  ASSERT_TRUE(bomb.ok());
  ASSERT_LT(bomb->size(), 1u << 20);
  const auto inflated = ParseSpoolTrace("bomb.trace", *bomb, 1 << 20);
  EXPECT_EQ(inflated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(inflated.status().message(), HasSubstr("inflates to more than 1048576 bytes"));
  const auto raw = ParseSpoolTrace("raw.trace", bytes_, bytes_.size() - 1);
  EXPECT_THAT(raw.status().message(), HasSubstr("more than the largest upload"));
  // At the limit exactly, it parses.
  EXPECT_TRUE(ParseSpoolTrace("ok.trace", bytes_, bytes_.size()).ok());
}

}  // namespace
}  // namespace habitat::agent
