#include "testing/metrics.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace habitat::testing {

std::string HttpGet(int port, const std::string& path, absl::Duration timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  const absl::Time give_up = absl::Now() + timeout;
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  std::string response;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    while (absl::Now() < give_up) {
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;  // closed (HTTP/1.0: the end of the body), error or timeout
      response.append(buffer, static_cast<size_t>(n));
    }
  }
  close(fd);
  return response;
}

absl::StatusOr<std::string> ScrapeMetrics(int port) {
  const std::string response = HttpGet(port, "/metrics", absl::Seconds(5));
  if (response.empty()) {
    return absl::UnavailableError(absl::StrCat("no answer from metrics port ", port));
  }
  const size_t body = response.find("\r\n\r\n");
  if (response.compare(0, 9, "HTTP/1.1 ") != 0 && response.compare(0, 9, "HTTP/1.0 ") != 0) {
    return absl::InternalError(absl::StrCat("not an HTTP response: ", response.substr(0, 80)));
  }
  if (response.compare(9, 3, "200") != 0 || body == std::string::npos) {
    return absl::InternalError(absl::StrCat("metrics answered: ", response.substr(0, 80)));
  }
  return response.substr(body + 4);
}

std::map<std::string, double> CounterValues(const std::string& exposition,
                                            const std::string& family) {
  std::map<std::string, double> values;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, family + "{")) continue;
    const size_t close = line.find('}');
    if (close == absl::string_view::npos) continue;
    // Label values here (rpc and code names) hold no quotes or commas.
    const absl::string_view labels = line.substr(family.size() + 1, close - family.size() - 1);
    std::map<std::string, std::string> sorted;
    for (absl::string_view pair : absl::StrSplit(labels, ',', absl::SkipEmpty())) {
      const size_t eq = pair.find('=');
      if (eq == absl::string_view::npos) continue;
      absl::string_view value = pair.substr(eq + 1);
      absl::ConsumePrefix(&value, "\"");
      absl::ConsumeSuffix(&value, "\"");
      sorted[std::string(pair.substr(0, eq))] = std::string(value);
    }
    double value = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(line.substr(close + 1)), &value)) continue;
    values[absl::StrJoin(sorted, ",", absl::PairFormatter("="))] = value;
  }
  return values;
}

}  // namespace habitat::testing
