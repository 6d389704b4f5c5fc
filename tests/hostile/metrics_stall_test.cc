// Idle connections to /metrics must not stall the scrapes behind them:
// civetweb gives each connection a worker thread until its request is read,
// and with prometheus-cpp's defaults (2 workers, 30 s read timeout) two
// silent connections held every scrape for ~30 s, paging HabitatServerDown.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>
#include <regex>
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

int MetricsPort(const std::string& log) {
  std::smatch match;
  static const std::regex kPort("metrics on port ([0-9]+)");
  return std::regex_search(log, match, kPort) ? std::stoi(match[1]) : 0;
}

// GET /metrics with a receive timeout; the status line, or "" when nothing
// came back in time.
std::string StatusLineOfScrape(int port, absl::Duration timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  std::string response;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buffer[256];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) response.assign(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return response.substr(0, response.find("\r\n"));
}

TEST(MetricsStallTest, SilentConnectionsDoNotHoldUpAScrape) {
  ServerProcess server({{"--metrics_address=127.0.0.1:0"}});
  ASSERT_TRUE(server.WaitServing()) << server.Stderr();
  const int port = MetricsPort(server.Stderr());
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
