#include "tests/integration/test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/trace_loader.h"
#include "common/grpc/grpc_status.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

#ifndef HABITAT_TESTDATA_DIR
#error "HABITAT_TESTDATA_DIR must be defined"
#endif

namespace habitat::testing {

absl::StatusOr<v1::Trace> LoadFixtureTrace(const std::string& relative) {
  // <model>_b<batch>_<precision>.json.gz; the model name may hold '_'.
  absl::string_view base(relative);
  base.remove_prefix(relative.find_last_of('/') + 1);
  const bool named = absl::ConsumeSuffix(&base, ".json.gz");
  const std::string stem(base);
  const size_t precision_at = stem.rfind('_');
  const size_t batch_at = precision_at == std::string::npos || precision_at == 0
                              ? std::string::npos
                              : stem.rfind("_b", precision_at - 1);
  uint32_t batch = 0;
  if (!named || batch_at == std::string::npos ||
      !absl::SimpleAtoi(stem.substr(batch_at + 2, precision_at - batch_at - 2), &batch)) {
    return absl::InvalidArgumentError(absl::StrCat(relative, ": not <model>_b<N>_<precision>"));
  }
  TraceLoadOptions options;
  options.model_name = stem.substr(0, batch_at);
  options.batch_size = batch;
  // The capture names autocast bf16 runs "bf16".
  std::string precision = stem.substr(precision_at + 1);
  if (precision == "bf16") precision = "amp_bf16";
  auto parsed = ParsePrecision(precision);
  if (parsed.ok()) options.precision = *parsed;
  return LoadTraceFile(absl::StrCat(HABITAT_TESTDATA_DIR, "/", relative), options);
}

absl::StatusOr<std::string> ScrapeMetrics(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("connect to metrics port ", port, ": ", error));
  }
  const std::string request =
      "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return absl::InternalError("cannot send the HTTP request");
  }
  std::string response;
  char buffer[8192];
  while (true) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0) {
      const std::string error = std::strerror(errno);
      ::close(fd);
      return absl::InternalError(absl::StrCat("recv: ", error));
    }
    if (n == 0) break;
    response.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
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

absl::StatusOr<int> HealthCheck(const std::string& address, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return static_cast<int>(response.status());
}

}  // namespace habitat::testing
