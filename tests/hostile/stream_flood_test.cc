// A stream flood against the real server binary: connections with no token
// that open HTTP/2 streams (HEADERS only) and never send a message. Without
// a stream cap and a memory quota each such stream held about 11.5 KB, and
// one connection took the server to 2-4 GB in seconds. gRPC 1.51 applies the
// cap only once the client acknowledges the server's SETTINGS, which these
// clients never do; the server's frame guard (server/http2_frame_guard.h)
// closes them. Loopback only; every loop is bounded in count and time.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "testing/server_process.h"
#include "tests/hostile/hostile_support.h"

namespace habitat::hostile {
namespace {

using ::habitat::testing::ServerProcess;
using ::habitat::testing::ServerSpec;

constexpr int kConnections = 4;
constexpr int kStreamsPerConnection = 5000;
// Growth of the server's peak RSS the flood may cause when streams are
// capped: 4 connections x 100 streams at ~11.5 KB is under 5 MiB; the rest
// is slack for gRPC's buffers. Unguarded, the same flood holds 20,000
// streams, about 220 MiB.
#ifdef __SANITIZE_ADDRESS__
// AddressSanitizer's redzones and quarantine about double what the server
// holds (measured: ~49 MiB for the guarded flood).
constexpr long kCappedGrowthKib = 96 << 10;
#else
constexpr long kCappedGrowthKib = 48 << 10;
#endif

void AppendFrameHeader(size_t length, uint8_t type, uint8_t flags, uint32_t stream,
                       std::string* out) {
  out->push_back(static_cast<char>((length >> 16) & 0xff));
  out->push_back(static_cast<char>((length >> 8) & 0xff));
  out->push_back(static_cast<char>(length & 0xff));
  out->push_back(static_cast<char>(type));
  out->push_back(static_cast<char>(flags));
  for (int shift : {24, 16, 8, 0}) out->push_back(static_cast<char>((stream >> shift) & 0xff));
}

// A literal header field without indexing, its value raw (RFC 7541 6.2.2);
// `name_index` < 15 names a static-table entry, 0 a new name.
void AppendLiteral(int name_index, const std::string& name, const std::string& value,
                   std::string* block) {
  block->push_back(static_cast<char>(name_index));
  if (name_index == 0) {
    block->push_back(static_cast<char>(name.size()));
    block->append(name);
  }
  block->push_back(static_cast<char>(value.size()));
  block->append(value);
}

// The HEADERS frame (END_HEADERS, not END_STREAM) that opens a Predict call
// on `stream`: the stream stays open, waiting for a message that never comes.
std::string OpenStreamFrame(uint32_t stream) {
  std::string block;
  block.push_back(static_cast<char>(0x83));                               // :method POST
  block.push_back(static_cast<char>(0x86));                               // :scheme http
  AppendLiteral(4, "", "/habitat.v1.PredictionService/Predict", &block);  // :path
  AppendLiteral(1, "", "localhost", &block);                              // :authority
  AppendLiteral(0, "content-type", "application/grpc", &block);
  AppendLiteral(0, "te", "trailers", &block);
  std::string frame;
  AppendFrameHeader(block.size(), /*HEADERS*/ 0x1, /*END_HEADERS*/ 0x4, stream, &frame);
  frame += block;
  return frame;
}

struct FloodResult {
  long growth_kib = -1;
  bool alive = false;
  std::string health;
};

FloodResult FloodStreams(const std::vector<std::string>& flags) {
  ServerSpec spec;
  spec.flags = flags;
  ServerProcess server(spec);
  FloodResult result;
  if (!server.WaitServing()) {
    result.health = server.Stderr();
    return result;
  }
  const long before = server.PeakRssKib();
  std::vector<std::unique_ptr<IdleConnection>> connections;
  for (int c = 0; c < kConnections; ++c) {
    auto connection = std::make_unique<IdleConnection>(server.port());
    std::string frames;
    for (int i = 0; i < kStreamsPerConnection; ++i) {
      frames += OpenStreamFrame(static_cast<uint32_t>(2 * i + 1));
    }
    connection->Send(frames, absl::Seconds(10));
    connections.push_back(std::move(connection));
  }
  // Let the server read and set up what it was sent.
  absl::SleepFor(absl::Seconds(2));
  for (auto& connection : connections) connection->Drain();
  result.growth_kib = server.PeakRssKib() - before;
  result.alive = server.Alive();
  std::string last;
  if (!WaitForHealth(server.address(), 1, absl::Seconds(10), &last)) result.health = last;
  return result;
}

TEST(StreamFloodTest, HeadersOnlyStreamsCostABoundedAmountAndOthersAreServed) {
  const FloodResult capped = FloodStreams({});
  EXPECT_TRUE(capped.alive);
  EXPECT_EQ(capped.health, "") << "a client was not served during the flood";
  ASSERT_GE(capped.growth_kib, 0);
  EXPECT_LT(capped.growth_kib, kCappedGrowthKib)
      << "peak RSS grew by " << capped.growth_kib << " KiB under " << kConnections << " x "
      << kStreamsPerConnection << " token-less streams";
}

// The control: the same flood against a server without the cap (so without
// the guard's limit before the SETTINGS acknowledgement) grows by far more
// than the bound above, so the bound tests the guard.
TEST(StreamFloodTest, WithoutTheCapTheSameFloodGrowsPastTheBound) {
  const FloodResult uncapped =
      FloodStreams({"--max_concurrent_streams=0", "--grpc_memory_quota_mb=0"});
  ASSERT_TRUE(uncapped.alive);
  EXPECT_GT(uncapped.growth_kib, 2 * kCappedGrowthKib)
      << "the uncapped flood grew peak RSS by only " << uncapped.growth_kib << " KiB";
}

// HTTP/2 Rapid Reset (CVE-2023-44487): a client that acknowledges the
// SETTINGS, then opens and at once resets stream after stream, is never over
// the stream cap. The frame guard closes it once it has reset more than its
// limit in the window (2,000 in 10 s); gRPC 1.51 alone never would.
TEST(StreamFloodTest, RapidResetClosesTheConnection) {
  ServerProcess server(ServerSpec{});
  ASSERT_TRUE(server.WaitServing()) << server.Stderr();
  IdleConnection connection(server.port());
  ASSERT_TRUE(connection.ReadSettings(absl::Seconds(5)).ok());
  std::string frames;
  AppendFrameHeader(0, /*SETTINGS*/ 0x4, /*ACK*/ 0x1, 0, &frames);
  constexpr int kPairs = 5000;
  for (int i = 0; i < kPairs; ++i) {
    const uint32_t stream = static_cast<uint32_t>(2 * i + 1);
    frames += OpenStreamFrame(stream);
    AppendFrameHeader(4, /*RST_STREAM*/ 0x3, 0, stream, &frames);
    frames += std::string("\0\0\0\x08", 4);  // CANCEL
  }
  connection.Send(frames, absl::Seconds(10));
  EXPECT_TRUE(connection.WaitClosed(absl::Seconds(10)))
      << "the server kept a connection open that reset " << kPairs << " streams";
  EXPECT_TRUE(server.Alive());
  std::string last;
  EXPECT_TRUE(WaitForHealth(server.address(), 1, absl::Seconds(10), &last)) << last;
  EXPECT_TRUE(server.WaitForStderr("reset more than 2000 streams", absl::Seconds(5)))
      << server.Stderr();
}

}  // namespace
}  // namespace habitat::hostile
