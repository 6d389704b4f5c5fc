// Connection floods against the habitat-server binary: a client that opens
// idle connections until the server runs out of file descriptors must not
// leave it unable to accept (gRPC 1.51 stops its listener for good on
// EMFILE), connections beyond --max_connections are closed at once, idle
// and half-open connections are closed after their limits, and when the
// listener is lost anyway health says NOT_SERVING.
#include <sys/resource.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/health_check.h"
#include "testing/server_process.h"
#include "tests/hostile/hostile_support.h"

namespace habitat::hostile {
namespace {

using ::habitat::testing::CheckHealth;
using ::habitat::testing::ServerProcess;
using ::habitat::testing::ServerSpec;
using ::testing::HasSubstr;
using ::testing::Not;
using State = IdleConnection::State;

// The server's descriptor limit in the flood tests, and how many
// connections the flood opens: comfortably more than the server can hold.
constexpr int kServerNofile = 256;
constexpr int kFloodConnections = 600;

struct Census {
  int served = 0;
  int closed = 0;
  int silent = 0;
};

// Opens up to `count` idle connections (at most 20 s), gives the server
// `settle` to act on them, and sorts them by what it did.
std::vector<std::unique_ptr<IdleConnection>> Flood(int port, int count, absl::Duration settle,
                                                   Census* census) {
  std::vector<std::unique_ptr<IdleConnection>> flood;
  const absl::Time end = absl::Now() + absl::Seconds(20);
  for (int i = 0; i < count && absl::Now() < end; ++i) {
    flood.push_back(std::make_unique<IdleConnection>(port));
  }
  absl::SleepFor(settle);
  for (auto& connection : flood) {
    switch (connection->First(absl::ZeroDuration())) {
      case State::kServed:
        ++census->served;
        break;
      case State::kClosed:
        ++census->closed;
        break;
      case State::kSilent:
        ++census->silent;
        break;
    }
  }
  return flood;
}

std::string Describe(const Census& census) {
  return absl::StrCat(census.served, " served, ", census.closed, " closed, ", census.silent,
                      " left waiting");
}

class ConnectionFloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // This process holds the whole flood.
    rlimit limit{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
    if (limit.rlim_cur < 4096 && limit.rlim_cur < limit.rlim_max) {
      limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, 4096);
      ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
    }
    ASSERT_GE(limit.rlim_cur, static_cast<rlim_t>(kFloodConnections + 64));
  }
};

// The design guarantee: the server itself survives descriptor exhaustion.
// Connections it cannot hold are closed at once instead of waiting in the
// kernel's queue, the health-only port keeps answering meanwhile (it keeps
// a share of the descriptors), and once the flood ends the main port serves
// again, without a restart.
TEST_F(ConnectionFloodTest, FloodBeyondTheDescriptorLimitIsShedAndTheServerServesAfter) {
  ServerProcess server({{}, kServerNofile});
  ASSERT_TRUE(server.WaitServing()) << server.Stderr();
  ASSERT_EQ(CheckHealth(server.address(), absl::Seconds(5)).value_or(-1), 1);

  Census census;
  auto flood = Flood(server.port(), kFloodConnections, absl::Seconds(2), &census);
  EXPECT_EQ(census.silent, 0) << Describe(census);
  EXPECT_GT(census.closed, kFloodConnections - kServerNofile) << Describe(census);
  EXPECT_GT(census.served, 0) << Describe(census);
  std::string last;
  EXPECT_TRUE(WaitForHealth(server.health_address(), 1, absl::Seconds(10), &last))
      << "health-only port during the flood: " << last;

  flood.clear();
  EXPECT_TRUE(WaitForHealth(server.address(), 1, absl::Seconds(15), &last))
      << "main port after the flood: " << last << "\n"
      << server.Stderr();
  IdleConnection after(server.port());
  EXPECT_EQ(after.First(absl::Seconds(5)), State::kServed);
  EXPECT_THAT(server.Stderr(), Not(HasSubstr("Failed accept4")));
  EXPECT_TRUE(server.Alive());
}

TEST_F(ConnectionFloodTest, ConnectionsBeyondMaxConnectionsAreClosedAtOnce) {
  constexpr int kMax = 40;
  ServerProcess server({{absl::StrCat("--max_connections=", kMax)}});
  ASSERT_TRUE(server.WaitServing()) << server.Stderr();

  Census census;
  auto flood = Flood(server.port(), kMax + 20, absl::Seconds(1), &census);
  EXPECT_EQ(census.served, kMax) << Describe(census);
  EXPECT_EQ(census.closed, 20) << Describe(census);

  // Closing served connections frees their slots.
  int dropped = 0;
  for (auto& connection : flood) {
    if (dropped < 10 && connection->First(absl::ZeroDuration()) == State::kServed) {
      connection.reset();
      ++dropped;
    }
  }
  ASSERT_EQ(dropped, 10);
  absl::SleepFor(absl::Milliseconds(300));
  Census again;
  auto more = Flood(server.port(), 10, absl::Seconds(1), &again);
  EXPECT_EQ(again.served, 10) << Describe(again);
}

// One client holding every slot of a port keeps everyone else out (70
// idle connections starved the health port's probes): each peer address
// gets its share, and the others still get in.
TEST_F(ConnectionFloodTest, OnePeerCannotHoldEverySlotOfAPort) {
  constexpr int kPerPeer = 10;
  ServerProcess server({{absl::StrCat("--max_connections_per_peer=", kPerPeer)}});
  ASSERT_TRUE(server.WaitServing()) << server.Stderr();
  Census census;
  auto flood = Flood(server.port(), kPerPeer + 5, absl::Seconds(1), &census);
  EXPECT_EQ(census.served, kPerPeer) << Describe(census);
  EXPECT_EQ(census.closed, 5) << Describe(census);
  IdleConnection other(server.port(), true, "127.0.0.2");
  ASSERT_TRUE(other.connected());
  EXPECT_EQ(other.First(absl::Seconds(5)), State::kServed);

  // The health-only port: more idle connections from one peer than the
  // port holds, then a probe from another address.
  std::vector<std::unique_ptr<IdleConnection>> idle;
  for (int i = 0; i < 70; ++i) {
    idle.push_back(std::make_unique<IdleConnection>(server.health_port(), true, "127.0.0.2"));
  }
  absl::SleepFor(absl::Milliseconds(500));
  int served = 0;
  for (auto& connection : idle) served += connection->First(absl::ZeroDuration()) == State::kServed;
  EXPECT_LE(served, 8);  // the health port's share per peer
  EXPECT_EQ(CheckHealth(server.health_address(), absl::Seconds(5)).value_or(-1), 1);
  EXPECT_TRUE(server.Alive());
}

TEST_F(ConnectionFloodTest, IdleAndHalfOpenConnectionsAreClosed) {
  ServerProcess server({{"--max_connection_idle_seconds=1", "--handshake_timeout_seconds=1"}});
  ASSERT_TRUE(server.WaitServing()) << server.Stderr();
  IdleConnection idle(server.port());
  IdleConnection silent(server.port(), /*preface=*/false);
  ASSERT_EQ(idle.First(absl::Seconds(5)), State::kServed);
  // gRPC checks idleness with up to ~20% jitter; allow a few seconds.
  EXPECT_TRUE(idle.WaitClosed(absl::Seconds(6)));
  EXPECT_TRUE(silent.WaitClosed(absl::Seconds(6)));
}

// When the listener is lost anyway (here: the guard turned off, so gRPC
// 1.51's own accept loop meets EMFILE and stops), the self-probe notices
// and health turns NOT_SERVING on the health-only port, which Kubernetes
// probes, so the pod is restarted.
TEST_F(ConnectionFloodTest, LostListenerTurnsHealthNotServing) {
  ServerProcess server({{"--connection_guard=false", "--self_probe_seconds=0.3"}, kServerNofile});
  ASSERT_TRUE(server.WaitServing()) << server.Stderr();
  ASSERT_TRUE(WaitForHealth(server.health_address(), 1, absl::Seconds(5), nullptr));

  Census census;
  auto flood = Flood(server.port(), kFloodConnections, absl::Seconds(1), &census);
  ASSERT_TRUE(server.WaitForStderr("Failed accept4", absl::Seconds(10))) << server.Stderr();
  flood.clear();

  IdleConnection after(server.port());
  EXPECT_EQ(after.First(absl::Seconds(2)), State::kSilent)
      << "gRPC's listener was expected to stop accepting after EMFILE";
  std::string last;
  EXPECT_TRUE(WaitForHealth(server.health_address(), 2, absl::Seconds(15), &last))
      << "health-only port: " << last << "\n"
      << server.Stderr();
  EXPECT_THAT(server.Stderr(), HasSubstr("health NOT_SERVING"));
}

// A stream flood: one connection, with no token, opening HTTP/2 streams it
// never uses took the server to 2-4 GB in seconds, because gRPC 1.51 sets
// no SETTINGS_MAX_CONCURRENT_STREAMS. Both gRPC ports must advertise the cap
// (streams beyond it are refused by gRPC's transport), and a flag sets it.
TEST(StreamCapTest, EveryGrpcPortCapsConcurrentStreamsPerConnection) {
  constexpr int kMaxConcurrentStreams = 3;  // SETTINGS_MAX_CONCURRENT_STREAMS
  for (const int cap : {0, 7}) {
    ServerSpec spec;
    if (cap > 0) spec.flags.push_back(absl::StrCat("--max_concurrent_streams=", cap));
    ServerProcess server(spec);
    ASSERT_TRUE(server.WaitServing()) << server.Stderr();
    for (const int port : {server.port(), server.health_port()}) {
      auto settings = ServerSettings(port, absl::Seconds(5));
      ASSERT_TRUE(settings.ok()) << settings.status();
      ASSERT_TRUE(settings->count(kMaxConcurrentStreams)) << "port " << port;
      // Without the flag: the default, 100.
      EXPECT_EQ(settings->at(kMaxConcurrentStreams), cap > 0 ? cap : 100) << "port " << port;
    }
  }
}

}  // namespace
}  // namespace habitat::hostile
