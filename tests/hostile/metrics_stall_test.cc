// Idle connections to /metrics must not stall the scrapes behind them:
// civetweb gives each connection a worker thread until its request is read,
// and with prometheus-cpp's defaults (2 workers, 30 s read timeout) two
// silent connections held every scrape for ~30 s, paging HabitatServerDown.

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hostile/hostile_support.h"

namespace habitat::hostile {
namespace {

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
  const int port = MetricsPort(server);
  ASSERT_GT(port, 0) << server.Stderr();
  ASSERT_THAT(StatusLineOfScrape(port, kScrapeDeadline), MatchesRegex("HTTP/1\\.[01] 200.*"));

  std::vector<std::unique_ptr<IdleConnection>> silent;
  for (int i = 0; i < kSilentConnections; ++i) {
    silent.push_back(std::make_unique<IdleConnection>(port, /*preface=*/false));
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

}  // namespace
}  // namespace habitat::hostile
