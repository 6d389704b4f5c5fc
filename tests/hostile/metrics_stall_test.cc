// Idle connections to /metrics must not stall the scrapes behind them:
// civetweb gives each connection a worker thread until its request is read,
// and with prometheus-cpp's defaults (2 workers, 30 s read timeout) two
// silent connections held every scrape for ~30 s, paging HabitatServerDown.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/metrics.h"
#include "testing/server_process.h"
#include "tests/hostile/hostile_support.h"

namespace habitat::hostile {
namespace {

using ::habitat::testing::HttpGet;
using ::habitat::testing::ServerProcess;
using ::testing::MatchesRegex;

// The number of silent connections: more than civetweb's default workers,
// fewer than the server's.
constexpr int kSilentConnections = 4;
// A scrape is answered within this much, silent connections or not.
constexpr absl::Duration kScrapeDeadline = absl::Seconds(3);

// The status line of GET /metrics, or "" when nothing came back in time.
std::string StatusLineOfScrape(int port, absl::Duration timeout) {
  const std::string response = HttpGet(port, "/metrics", timeout);
  return response.substr(0, response.find("\r\n"));
}

TEST(MetricsStallTest, SilentConnectionsDoNotHoldUpAScrape) {
  ServerProcess server({{"--metrics_address=127.0.0.1:0"}});
  ASSERT_TRUE(server.WaitServing()) << server.Stderr();
  const int port = server.metrics_port();
  ASSERT_GT(port, 0) << server.Stderr();
  ASSERT_THAT(StatusLineOfScrape(port, kScrapeDeadline), MatchesRegex("HTTP/1\\.[01] 200.*"));

  std::vector<std::unique_ptr<IdleConnection>> silent;
  for (int i = 0; i < kSilentConnections; ++i) {
    // From another peer than the scraper: one peer's share of the workers
    // is the next test's.
    silent.push_back(std::make_unique<IdleConnection>(port, /*preface=*/false, "127.0.0.2"));
    ASSERT_TRUE(silent.back()->connected());
  }
  absl::SleepFor(absl::Milliseconds(200));  // accepted and handed to workers
  const absl::Time start = absl::Now();
  EXPECT_THAT(StatusLineOfScrape(port, kScrapeDeadline), MatchesRegex("HTTP/1\\.[01] 200.*"))
      << "no answer within " << kScrapeDeadline << " behind " << kSilentConnections
      << " silent connections";
  EXPECT_LT(absl::Now() - start, kScrapeDeadline);
  // The silent connections are dropped after the read timeout, not held.
  for (auto& connection : silent) {
    EXPECT_TRUE(connection->WaitClosed(absl::Seconds(15)));
  }
}

// Half-open connections that are reopened as soon as the server closes
// them: with a worker per connection and no limit per peer, 32 of them
// from one address left 0 of 4 scrapes answered within 10 s. One peer now
// holds only a few of the workers, so a scraper at another address gets in.
TEST(MetricsStallTest, ReconnectingHalfOpenConnectionsFromOnePeerDoNotStallScrapes) {
  constexpr int kHalfOpen = 32;
  constexpr int kScrapes = 4;
  ServerProcess server({{"--metrics_address=127.0.0.1:0"}});
  ASSERT_TRUE(server.WaitServing()) << server.Stderr();
  const int port = server.metrics_port();
  ASSERT_GT(port, 0) << server.Stderr();

  std::atomic<bool> stop{false};
  std::thread attacker([&] {
    std::vector<std::unique_ptr<IdleConnection>> held(kHalfOpen);
    // Bounded: the test stops it, and it stops by itself after 60 s.
    const absl::Time end = absl::Now() + absl::Seconds(60);
    while (!stop.load() && absl::Now() < end) {
      for (auto& connection : held) {
        if (connection == nullptr || connection->WaitClosed(absl::ZeroDuration())) {
          connection = std::make_unique<IdleConnection>(port, /*preface=*/false, "127.0.0.2");
        }
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  absl::SleepFor(absl::Milliseconds(500));  // the workers are taken
  int answered = 0;
  for (int i = 0; i < kScrapes; ++i) {
    const absl::Time start = absl::Now();
    const std::string status = StatusLineOfScrape(port, kScrapeDeadline);
    answered += status.rfind("HTTP/1.", 0) == 0 && status.find(" 200") != std::string::npos &&
                absl::Now() - start < kScrapeDeadline;
    absl::SleepFor(absl::Seconds(1));
  }
  stop = true;
  attacker.join();
  EXPECT_EQ(answered, kScrapes) << "scrapes answered within " << kScrapeDeadline << " behind "
                                << kHalfOpen << " reconnecting half-open connections";
  EXPECT_TRUE(server.Alive());
}

}  // namespace
}  // namespace habitat::hostile
