#include "server/http2_frame_guard.h"

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

const std::string kPreface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);

std::string Frame(uint32_t length, unsigned char type, unsigned char flags, uint32_t stream) {
  std::string f;
  f.push_back(static_cast<char>(length >> 16));
  f.push_back(static_cast<char>(length >> 8));
  f.push_back(static_cast<char>(length));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  for (int shift : {24, 16, 8, 0}) f.push_back(static_cast<char>(stream >> shift));
  return f + std::string(length, 'x');
}
std::string Headers(uint32_t stream) { return Frame(12, 0x1, 0x4, stream); }
std::string Reset(uint32_t stream) { return Frame(4, 0x3, 0, stream); }
std::string SettingsAck() { return Frame(0, 0x4, 0x1, 0); }

// Feeds `bytes` one byte at a time: frames split anywhere are still read.
bool FeedBytewise(Http2FrameCounter& counter, const std::string& bytes, absl::Time now) {
  bool ok = true;
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    ok = counter.Feed(&byte, 1, now);
  }
  return ok;
}

TEST(Http2FrameCounterTest, StreamsBeyondTheCapBeforeTheAckCloseTheConnection) {
  Http2Limits limits;
  limits.max_streams_before_ack = 3;
  Http2FrameCounter counter(limits);
  const absl::Time now = absl::Now();
  // SETTINGS with a payload (not an ACK), then three streams: allowed.
  std::string bytes = kPreface + Frame(6, 0x4, 0, 0) + Headers(1) + Headers(3) + Headers(5);
  EXPECT_TRUE(FeedBytewise(counter, bytes, now));
  EXPECT_EQ(counter.streams_opened(), 3);
  // A CONTINUATION-free second HEADERS on an old stream (trailers) is no
  // new stream.
  EXPECT_TRUE(FeedBytewise(counter, Headers(5), now));
  EXPECT_FALSE(FeedBytewise(counter, Headers(7), now));
  EXPECT_NE(counter.why().find("without acknowledging"), std::string::npos) << counter.why();
  // Once broken, it stays broken.
  EXPECT_FALSE(counter.Feed(nullptr, 0, now));
}

TEST(Http2FrameCounterTest, AfterTheAckGrpcsOwnCapApplies) {
  Http2Limits limits;
  limits.max_streams_before_ack = 2;
  Http2FrameCounter counter(limits);
  std::string bytes = kPreface + SettingsAck();
  for (uint32_t s = 1; s < 200; s += 2) bytes += Headers(s);
  const std::string all = bytes;
  EXPECT_TRUE(
      counter.Feed(reinterpret_cast<const unsigned char*>(all.data()), all.size(), absl::Now()));
  EXPECT_TRUE(counter.settings_acked());
  EXPECT_EQ(counter.streams_opened(), 100);
}

TEST(Http2FrameCounterTest, ResetsBeyondTheWindowLimitCloseTheConnection) {
  Http2Limits limits;
  limits.max_resets_per_window = 10;
  limits.reset_window = absl::Seconds(10);
  Http2FrameCounter counter(limits);
  absl::Time now = absl::FromUnixSeconds(1000);
  std::string bytes = kPreface + SettingsAck();
  for (uint32_t s = 1; s <= 19; s += 2) bytes += Headers(s) + Reset(s);  // 10 resets
  EXPECT_TRUE(FeedBytewise(counter, bytes, now));
  // The window has passed: ten more are fine.
  now += absl::Seconds(11);
  bytes.clear();
  for (uint32_t s = 21; s <= 39; s += 2) bytes += Headers(s) + Reset(s);
  EXPECT_TRUE(FeedBytewise(counter, bytes, now));
  // The eleventh in the same window is not.
  EXPECT_FALSE(FeedBytewise(counter, Headers(41) + Reset(41), now));
  EXPECT_NE(counter.why().find("reset more than 10 streams"), std::string::npos) << counter.why();
}

TEST(Http2FrameCounterTest, LargePayloadsAreSkippedNotRead) {
  Http2Limits limits;
  limits.max_streams_before_ack = 1;
  Http2FrameCounter counter(limits);
  // A DATA frame whose payload looks like HEADERS frames must not count.
  std::string fake;
  for (uint32_t s = 101; s < 121; s += 2) fake += Headers(s);
  std::string data = Frame(0, 0x0, 0, 1);
  data[0] = static_cast<char>(fake.size() >> 16);
  data[1] = static_cast<char>(fake.size() >> 8);
  data[2] = static_cast<char>(fake.size());
  EXPECT_TRUE(FeedBytewise(counter, kPreface + Headers(1) + data + fake, absl::Now()));
  EXPECT_EQ(counter.streams_opened(), 1);
}

}  // namespace
}  // namespace habitat
