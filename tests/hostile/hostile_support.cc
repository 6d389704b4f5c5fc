#include "tests/hostile/hostile_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_io.h"
#include "testing/health_check.h"

namespace habitat::hostile {

habitat::v1::Trace RepeatedAgentTrace(int operations, bool with_host_events) {
  auto bytes = habitat::ReadFile(
      std::string(HABITAT_TESTDATA_DIR) + "/agent_suite/h100/resnet50_b32_fp32.trace.gz",
      size_t{1} << 30);
  habitat::v1::Trace base;
  if (!bytes.ok() || !base.ParseFromString(*bytes) || base.operations_size() == 0) {
    std::fprintf(stderr, "cannot read the ResNet-50 agent trace: %s\n",
                 bytes.status().ToString().c_str());
    std::abort();
  }
  habitat::v1::Trace trace = base;
  while (trace.operations_size() < operations) {
    for (const auto& op : base.operations()) {
      if (trace.operations_size() >= operations) break;
      *trace.add_operations() = op;
    }
    if (with_host_events) {
      for (const auto& event : base.host_events()) *trace.add_host_events() = event;
    }
  }
  return trace;
}

bool WaitForHealth(const std::string& address, int want, absl::Duration timeout,
                   std::string* last) {
  const absl::Time end = absl::Now() + timeout;
  do {
    auto health = testing::CheckHealth(address, absl::Seconds(2));
    if (last != nullptr) {
      *last = health.ok() ? absl::StrCat("status ", *health) : health.status().ToString();
    }
    if (health.ok() && *health == want) return true;
    absl::SleepFor(absl::Milliseconds(100));
  } while (absl::Now() < end);
  return false;
}

IdleConnection::IdleConnection(int port, bool preface, const std::string& source) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  if (!source.empty()) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
        bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof(from)) != 0) {
      close(fd);
      return;
    }
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Client preface, then SETTINGS with no parameters (length 0, type 4).
  static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
  constexpr size_t kPrefaceBytes = sizeof(kPreface) - 1;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      (preface &&
       send(fd, kPreface, kPrefaceBytes, MSG_NOSIGNAL) != static_cast<ssize_t>(kPrefaceBytes))) {
    close(fd);
    return;
  }
  fd_ = fd;
}

IdleConnection::~IdleConnection() {
  if (fd_ >= 0) close(fd_);
}

bool IdleConnection::Send(const std::string& bytes, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  size_t sent = 0;
  while (fd_ >= 0 && sent < bytes.size()) {
    const ssize_t n =
        send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    // The server may be waiting for us to read what it sent (its RST_STREAM
    // and WINDOW_UPDATE frames) before it reads more.
    Drain();
    pollfd writable{fd_, POLLOUT, 0};
    poll(&writable, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left), 100)));
  }
  return fd_ >= 0 && sent == bytes.size();
}

void IdleConnection::Drain() {
  if (fd_ < 0) return;
  char buffer[16384];
  while (recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT) > 0) {
  }
}

IdleConnection::State IdleConnection::First(absl::Duration timeout) {
  if (fd_ < 0) return State::kClosed;
  if (first_ != State::kSilent) return first_;
  pollfd readable{fd_, POLLIN, 0};
  if (poll(&readable, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) {
    return State::kSilent;
  }
  char buffer[256];
  first_ = recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT) > 0 ? State::kServed : State::kClosed;
  return first_;
}

bool IdleConnection::WaitClosed(absl::Duration timeout) {
  if (fd_ < 0) return true;
  const absl::Time end = absl::Now() + timeout;
  while (true) {
    const int64_t left = absl::ToInt64Milliseconds(end - absl::Now());
    if (left <= 0) return false;
    pollfd readable{fd_, POLLIN, 0};
    if (poll(&readable, 1, static_cast<int>(left)) <= 0) continue;
    char buffer[4096];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
  }
}

absl::StatusOr<std::map<int, uint32_t>> ServerSettings(int port, absl::Duration timeout) {
  IdleConnection connection(port);
  if (!connection.connected()) return absl::UnavailableError("cannot connect");
  return connection.ReadSettings(timeout);
}

absl::StatusOr<std::map<int, uint32_t>> IdleConnection::ReadSettings(absl::Duration timeout) {
  // A frame: 24-bit length, type, flags, 32-bit stream id, payload. The
  // server's first frame is SETTINGS (type 4): 6-byte entries of a 16-bit
  // identifier and a 32-bit value.
  std::string bytes;
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (bytes.size() >= 9) {
      const auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
      const size_t length = (byte(0) << 16) | (byte(1) << 8) | byte(2);
      if (byte(3) != 4) return absl::DataLossError("the first frame is not SETTINGS");
      if (bytes.size() >= 9 + length) {
        std::map<int, uint32_t> settings;
        for (size_t i = 9; i + 6 <= 9 + length; i += 6) {
          settings[(byte(i) << 8) | byte(i + 1)] =
              (uint32_t{byte(i + 2)} << 24) | (uint32_t{byte(i + 3)} << 16) |
              (uint32_t{byte(i + 4)} << 8) | uint32_t{byte(i + 5)};
        }
        return settings;
      }
    }
    pollfd readable{fd_, POLLIN, 0};
    if (poll(&readable, 1, 100) <= 0) continue;
    char buffer[1024];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n == 0) return absl::UnavailableError("the server closed the connection");
    if (n > 0) bytes.append(buffer, static_cast<size_t>(n));
  }
  return absl::DeadlineExceededError("no SETTINGS frame in time");
}

}  // namespace habitat::hostile
