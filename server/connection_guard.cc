#include "server/connection_guard.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace habitat {

// Defined by socket_interposers.cc, in the binaries that link
// habitat_socket_interposers; null elsewhere.
__attribute__((weak)) bool Accept4ReachesConnectionGuard();

namespace {

// Between two recounts of a full port's connections: a connection closed
// in between frees its slot up to this much later.
constexpr absl::Duration kRecountInterval = absl::Milliseconds(50);
// Pending connections accepted and closed per EMFILE, at most.
constexpr int kMaxDrainPerCall = 1024;

// The kernel call is made directly, so the guard needs no handle on the
// libc definition that socket_interposers.cc replaces.
int RawAccept4(int fd, sockaddr* address, socklen_t* address_length, int flags) {
  return static_cast<int>(syscall(SYS_accept4, fd, address, address_length, flags));
}

// Errors after which gRPC 1.51 stops accepting on the listener, while the
// condition is temporary: they leave the connection pending.
bool IsResourceError(int error) {
  return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
}

int PortOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  }
  return -1;
}

int LocalPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return -1;
  return PortOf(address);
}

int NofileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return INT32_MAX;
  return static_cast<int>(std::min<rlim_t>(limit.rlim_cur, INT32_MAX));
}

// IPv4 addresses as v4-mapped IPv6, so that a probe from 127.0.0.1 matches
// what a dual-stack listener sees (::ffff:127.0.0.1).
std::pair<std::string, int> EndpointOf(const sockaddr_storage& address) {
  unsigned char bytes[16] = {};
  if (address.ss_family == AF_INET) {
    bytes[10] = bytes[11] = 0xff;
    std::memcpy(bytes + 12, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, 4);
  } else if (address.ss_family == AF_INET6) {
    std::memcpy(bytes, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, 16);
  }
  return {std::string(reinterpret_cast<const char*>(bytes), sizeof(bytes)), PortOf(address)};
}

// "host:port" or "[v6]:port" with a numeric host.
absl::StatusOr<sockaddr_storage> ParseNumericAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not host:port"));
  }
  absl::string_view host(address.data(), colon);
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not host:port"));
  }
  const std::string host_string(host);
  sockaddr_storage result{};
  auto& v4 = reinterpret_cast<sockaddr_in&>(result);
  auto& v6 = reinterpret_cast<sockaddr_in6&>(result);
  if (inet_pton(AF_INET, host_string.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<uint16_t>(port));
  } else if (inet_pton(AF_INET6, host_string.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<uint16_t>(port));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("'", host_string, "' is not a numeric address"));
  }
  return result;
}

socklen_t LengthOf(const sockaddr_storage& address) {
  return address.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

}  // namespace

ConnectionGuard& ConnectionGuard::Get() {
  static ConnectionGuard* const guard = new ConnectionGuard();
  return *guard;
}

ConnectionGuard::ConnectionGuard() {
  absl::MutexLock lock(&reserve_mutex_);
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

bool ConnectionGuard::InterposesAccept4() {
  return Accept4ReachesConnectionGuard != nullptr && Accept4ReachesConnectionGuard();
}

void ConnectionGuard::Guard(int port, const PortGuard& guard) {
  absl::MutexLock lock(&mutex_);
  ports_[port].guard = guard;
}

void ConnectionGuard::Release(int port) {
  absl::MutexLock lock(&mutex_);
  ports_.erase(port);
}

PortConnectionStats ConnectionGuard::Stats(int port) {
  absl::MutexLock lock(&mutex_);
  PortConnectionStats stats;
  auto it = ports_.find(port);
  if (it == ports_.end()) return stats;
  Recount(it->second);
  stats.open = static_cast<int64_t>(it->second.open.size());
  stats.shed_over_limit = it->second.shed_over_limit;
  stats.shed_over_peer_limit = it->second.shed_over_peer_limit;
  stats.shed_out_of_fds = it->second.shed_out_of_fds;
  return stats;
}

void ConnectionGuard::Recount(Port& port) {
  port.last_recount = absl::Now();
  for (auto it = port.open.begin(); it != port.open.end();) {
    struct stat info {};
    if (fstat(it->first, &info) != 0 || info.st_ino != it->second.inode) {
      it = port.open.erase(it);
    } else {
      ++it;
    }
  }
}

bool ConnectionGuard::PeerIsFull(Port& port, const std::string& peer) {
  const auto max = static_cast<size_t>(std::max(0, port.guard.max_connections_per_peer));
  if (max == 0) return false;
  auto count = [&] {
    size_t n = 0;
    for (const auto& [fd, open] : port.open) n += open.peer == peer;
    return n;
  };
  if (count() < max) return false;
  if (absl::Now() - port.last_recount >= kRecountInterval) Recount(port);
  return count() >= max;
}

bool ConnectionGuard::AdmitLocked(Port& port, int connection, const std::string& peer) {
  // A connection recorded under this descriptor number has been closed.
  port.open.erase(connection);
  if (port.guard.shed) {
    // accept4 returns the lowest free descriptor, so every one below
    // `connection` is in use.
    if (port.guard.fd_reserve > 0 && connection >= NofileLimit() - port.guard.fd_reserve) {
      ++port.shed_out_of_fds;
      return false;
    }
    const size_t max = static_cast<size_t>(std::max(0, port.guard.max_connections));
    if (max > 0 && port.open.size() >= max) {
      if (absl::Now() - port.last_recount >= kRecountInterval) Recount(port);
      if (port.open.size() >= max) {
        ++port.shed_over_limit;
        return false;
      }
    }
    if (PeerIsFull(port, peer)) {
      ++port.shed_over_peer_limit;
      return false;
    }
  }
  struct stat info {};
  if (fstat(connection, &info) == 0) port.open[connection] = {info.st_ino, peer};
  return true;
}

void ConnectionGuard::DrainWithReserve(int listen_fd) {
  absl::MutexLock lock(&reserve_mutex_);
  for (int i = 0; i < kMaxDrainPerCall; ++i) {
    if (reserve_fd_ >= 0) close(reserve_fd_);
    const int connection = RawAccept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection >= 0) close(connection);
    reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (connection < 0) break;
  }
}

int ConnectionGuard::Accept(int listen_fd, sockaddr* address, socklen_t* address_length, int flags,
                            bool one_attempt) {
  const int port_number = LocalPort(listen_fd);
  bool shed = false;
  {
    absl::MutexLock lock(&mutex_);
    auto it = ports_.find(port_number);
    if (it == ports_.end()) return RawAccept4(listen_fd, address, address_length, flags);
    shed = it->second.guard.shed;
  }
  while (true) {
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof(peer);
    const int connection =
        RawAccept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &peer_length, flags);
    if (connection < 0) {
      const int error = errno;
      if (!shed || !IsResourceError(error)) {
        errno = error;
        return -1;
      }
      if (error == EMFILE || error == ENFILE) DrainWithReserve(listen_fd);
      {
        absl::MutexLock lock(&mutex_);
        auto it = ports_.find(port_number);
        if (it != ports_.end()) ++it->second.shed_out_of_fds;
      }
      errno = EAGAIN;
      return -1;
    }
    bool admit = true;
    std::optional<Http2Limits> inspect;
    ino_t inode = 0;
    {
      absl::MutexLock lock(&mutex_);
      const Endpoint endpoint = EndpointOf(peer);
      if (pending_probes_.erase(endpoint) > 0) {
        accepted_probes_.insert(endpoint);
        admit = false;
      } else {
        auto it = ports_.find(port_number);
        admit = it == ports_.end() || AdmitLocked(it->second, connection, endpoint.first);
        if (admit && it != ports_.end() && it->second.guard.inspect_http2) {
          inspect = it->second.guard.http2;
          // AdmitLocked recorded it (0 if its fstat failed).
          auto open = it->second.open.find(connection);
          if (open != it->second.open.end()) inode = open->second.inode;
        }
      }
    }
    if (!admit) {
      close(connection);
      if (one_attempt) {
        errno = EAGAIN;
        return -1;
      }
      continue;
    }
    if (inspect.has_value()) Http2FrameGuard::Get().Watch(connection, inode, *inspect);
    if (address != nullptr && address_length != nullptr) {
      std::memcpy(address, &peer, std::min(*address_length, peer_length));
      *address_length = peer_length;
    }
    return connection;
  }
}

absl::Status ConnectionGuard::ProbeListener(const std::string& address, absl::Duration timeout) {
  if (!InterposesAccept4()) {
    return absl::FailedPreconditionError(
        "accept4 does not pass through the connection guard (is habitat_socket_interposers "
        "linked, and libgrpc linked dynamically?)");
  }
  auto target = ParseNumericAddress(address);
  if (!target.ok()) return target.status();
  const absl::Time deadline = absl::Now() + timeout;
  const int fd = socket(target->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot open a socket to probe ", address, ": ", std::strerror(errno)));
  }
  // The source address is bound first so that the connection can be
  // recognised however early the listener accepts it.
  sockaddr_storage source = *target;
  if (source.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in&>(source).sin_port = 0;
  } else {
    reinterpret_cast<sockaddr_in6&>(source).sin6_port = 0;
  }
  socklen_t source_length = LengthOf(source);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&source), source_length) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&source), &source_length) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot bind a socket to probe ", address, ": ", std::strerror(error)));
  }
  const Endpoint endpoint = EndpointOf(source);
  {
    absl::MutexLock lock(&mutex_);
    pending_probes_.insert(endpoint);
  }
  absl::Status status;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&*target), LengthOf(*target)) != 0 &&
      errno != EINPROGRESS) {
    status = absl::UnavailableError(
        absl::StrCat("cannot connect to ", address, ": ", std::strerror(errno)));
  } else {
    pollfd writable{fd, POLLOUT, 0};
    const int wait_ms =
        static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    int error = 0;
    socklen_t error_length = sizeof(error);
    if (poll(&writable, 1, wait_ms) != 1) {
      status = absl::DeadlineExceededError(absl::StrCat("no TCP connection to ", address,
                                                        " within ", absl::FormatDuration(timeout)));
    } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &error_length) != 0 || error != 0) {
      status = absl::UnavailableError(
          absl::StrCat("cannot connect to ", address, ": ", std::strerror(error)));
    }
  }
  {
    absl::MutexLock lock(&mutex_);
    if (status.ok()) {
      struct Seen {
        const std::set<Endpoint>* accepted;
        const Endpoint* endpoint;
        bool operator()() const { return accepted->count(*endpoint) > 0; }
      } seen{&accepted_probes_, &endpoint};
      if (!mutex_.AwaitWithDeadline(absl::Condition(&seen), deadline)) {
        status = absl::DeadlineExceededError(absl::StrCat("the listener on ", address,
                                                          " did not accept a connection within ",
                                                          absl::FormatDuration(timeout)));
      }
    }
    pending_probes_.erase(endpoint);
    accepted_probes_.erase(endpoint);
  }
  close(fd);
  return status;
}

absl::StatusOr<std::string> ProbeAddressFor(const std::string& listen_address, int port) {
  if (absl::StartsWith(listen_address, "unix:") ||
      absl::StartsWith(listen_address, "unix-abstract:")) {
    return absl::UnimplementedError("a Unix socket has no TCP port to probe");
  }
  const size_t colon = listen_address.rfind(':');
  absl::string_view host(listen_address.data(),
                         colon == std::string::npos ? listen_address.size() : colon);
  absl::ConsumePrefix(&host, "[");
  absl::ConsumeSuffix(&host, "]");
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "localhost") {
    return absl::StrCat("127.0.0.1:", port);
  }
  const std::string host_string(host);
  in6_addr v6{};
  in_addr v4{};
  if (inet_pton(AF_INET, host_string.c_str(), &v4) == 1) return absl::StrCat(host, ":", port);
  if (inet_pton(AF_INET6, host_string.c_str(), &v6) == 1) {
    return absl::StrCat("[", host, "]:", port);
  }
  // A name: gRPC listens on every address it resolves to; probe the first.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host_string.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve '", host_string, "'"));
  }
  char text[INET6_ADDRSTRLEN] = {};
  std::string result;
  if (found->ai_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, text,
              sizeof(text));
    result = absl::StrCat(text, ":", port);
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(found->ai_addr)->sin6_addr, text,
              sizeof(text));
    result = absl::StrCat("[", text, "]:", port);
  }
  freeaddrinfo(found);
  return result;
}

}  // namespace habitat
