// Guards the accept loop of gRPC's listeners, which gRPC 1.51 leaves
// exposed in two ways: it has no limit on open connections, and any accept4
// error other than EAGAIN, EINTR or ECONNABORTED (EMFILE in particular: out
// of file descriptors) stops its listener for good, while the process keeps
// running and the rest of the server looks healthy.
//
// Binaries that link habitat_socket_interposers (socket_interposers.cc)
// define accept4 for the whole process. The dynamic linker binds libgrpc's
// accept4 calls to the executable's definition before libc's, so every
// connection a gRPC listener accepts passes through ConnectionGuard::Accept.
// For the ports registered with Guard() it
//  - closes a new connection at once (sheds it) when the port already has
//    its maximum of open connections, or when accepting it left fewer than
//    the port's reserve of file descriptors free, so a flood of connections
//    can neither exhaust the descriptors the store, metrics and probes need
//    nor grow memory without bound;
//  - turns EMFILE, ENFILE, ENOBUFS and ENOMEM into EAGAIN, which gRPC
//    retries, after draining the pending connections with a reserved
//    descriptor (the classic reserve-fd trick), so the listener outlives the
//    exhaustion and serves again once descriptors are free;
//  - recognises the connections of ProbeListener, which checks from inside
//    the process that gRPC's listener still calls accept: they are closed
//    without reaching gRPC.
// accept, which civetweb's /metrics listener calls, is interposed the same
// way, so that port gets the same limits. Listening sockets on other ports, and
// other callers, see plain accept4 and accept.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/http2_frame_guard.h"

namespace habitat {

struct PortGuard {
  // Open connections accepted on the port; beyond this new ones are shed.
  // 0: no count limit.
  int max_connections = 0;
  // Open connections from one peer address; beyond this its new ones are
  // shed, so that one client cannot hold every slot of the port. 0: no
  // per-peer limit (behind a proxy every client has the proxy's address).
  int max_connections_per_peer = 0;
  // A new connection is shed when fewer than this many file descriptors
  // would remain below RLIMIT_NOFILE once it is accepted.
  int fd_reserve = 0;
  // Off: connections are counted and probes recognised, but nothing is
  // shed and accept4 errors reach gRPC unchanged.
  bool shed = true;
  // Plaintext ports only: every admitted connection's frames are checked
  // against these limits (http2_frame_guard.h).
  bool inspect_http2 = false;
  Http2Limits http2;
};

struct PortConnectionStats {
  int64_t open = 0;  // accepted, not yet closed (as of the last count)
  int64_t shed_over_limit = 0;
  int64_t shed_over_peer_limit = 0;
  int64_t shed_out_of_fds = 0;
};

class ConnectionGuard {
 public:
  // The process-wide guard that accept4 consults.
  static ConnectionGuard& Get();

  // Guards the listening sockets bound to `port` (any address).
  void Guard(int port, const PortGuard& guard);
  // Back to plain accept4 for `port` (after its server shut down).
  void Release(int port);

  PortConnectionStats Stats(int port);

  // Connects to a listener at `address` (numeric host and port, e.g.
  // "127.0.0.1:50051" or "[::1]:50051") and waits up to `timeout` for the
  // guarded listener to accept the connection. DEADLINE_EXCEEDED when it
  // did not (the listener no longer accepts), UNAVAILABLE when the connect
  // failed, RESOURCE_EXHAUSTED when no socket could be opened,
  // FAILED_PRECONDITION when accept4 does not pass through this guard.
  absl::Status ProbeListener(const std::string& address, absl::Duration timeout);

  // Whether libgrpc's accept4 reaches Accept (false without
  // habitat_socket_interposers, or in a statically linked build, where the
  // guard cannot work).
  static bool InterposesAccept4();

  // The guarded accept4 (and accept). With `one_attempt` a shed connection
  // fails the call with EAGAIN instead of accepting the next one.
  int Accept(int listen_fd, sockaddr* address, socklen_t* address_length, int flags,
             bool one_attempt = false);

 private:
  ConnectionGuard();

  // A connection's address in one form for IPv4, IPv6 and v4-mapped IPv6.
  using Endpoint = std::pair<std::string, int>;  // 16-byte address, port
  struct OpenConnection {
    ino_t inode = 0;   // a closed fd number may be reused by an unrelated file
    std::string peer;  // the 16-byte address of EndpointOf
  };
  struct Port {
    PortGuard guard;
    // Accepted connections still believed open, by fd.
    std::map<int, OpenConnection> open;
    absl::Time last_recount = absl::InfinitePast();
    int64_t shed_over_limit = 0;
    int64_t shed_over_peer_limit = 0;
    int64_t shed_out_of_fds = 0;
  };

  // Drops closed connections from `port.open`.
  static void Recount(Port& port);
  // Whether `connection` (just accepted on `port`) must be shed; records it
  // as open when not.
  bool AdmitLocked(Port& port, int connection, const std::string& peer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether `peer` already holds its maximum of open connections on `port`.
  static bool PeerIsFull(Port& port, const std::string& peer);
  // Accepts and closes what is pending on `listen_fd` with the reserve
  // descriptor freed for it.
  void DrainWithReserve(int listen_fd);

  absl::Mutex mutex_;
  std::map<int, Port> ports_ ABSL_GUARDED_BY(mutex_);
  // ProbeListener's connections not yet seen by Accept / seen.
  std::set<Endpoint> pending_probes_ ABSL_GUARDED_BY(mutex_);
  std::set<Endpoint> accepted_probes_ ABSL_GUARDED_BY(mutex_);
  int64_t accept_calls_ ABSL_GUARDED_BY(mutex_) = 0;
  // Kept open to be closed when the process is out of descriptors, so that
  // pending connections can still be accepted and closed.
  absl::Mutex reserve_mutex_;
  int reserve_fd_ ABSL_GUARDED_BY(reserve_mutex_) = -1;
};

// The numeric address ProbeListener should dial to reach a gRPC listener
// given `listen_address` (--address) that was bound to `port`: loopback for
// wildcard hosts and localhost, else the host (resolved if a name).
// UNIMPLEMENTED for Unix sockets.
absl::StatusOr<std::string> ProbeAddressFor(const std::string& listen_address, int port);

}  // namespace habitat
