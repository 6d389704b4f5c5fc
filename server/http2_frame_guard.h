// Reads the HTTP/2 frame headers clients send on the server's plaintext
// ports, before gRPC does, and closes a connection that floods streams.
//
// gRPC 1.51 applies its SETTINGS_MAX_CONCURRENT_STREAMS only once the client
// has acknowledged the server's SETTINGS frame. A client that never does can
// open streams without limit: 4 connections that sent 20,000 HEADERS frames
// each (no token, no message) took the server from 40 MB to 1 GB in two
// seconds, whatever the ResourceQuota, which does not charge call arenas.
// Resetting each stream right after opening it (HTTP/2 Rapid Reset,
// CVE-2023-44487) is not bounded by any stream cap at all. So, per accepted
// connection of a port that asks for it:
//  - before the client acknowledges the server's SETTINGS, at most
//    `max_streams_before_ack` new streams (HEADERS frames on new stream
//    ids); the next one closes the connection;
//  - at most `max_resets_per_window` RST_STREAM frames from the client in
//    any `reset_window`; the next one closes the connection.
// Only frame headers are read (9 bytes per frame); payloads are skipped.
// TLS ports are not inspected: their bytes are ciphertext here
// (docs/operations.md says what covers them).
//
// socket_interposers.cc defines recvmsg for the binaries that link
// habitat_socket_interposers: libgrpc's reads of a connection pass through
// Received() after the kernel call. Connections are registered by
// ConnectionGuard's accept; every other descriptor sees plain recvmsg.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace habitat {

struct Http2Limits {
  // New streams a client may open before it acknowledges the server's
  // SETTINGS; the server's --max_concurrent_streams. 0: no limit.
  int max_streams_before_ack = 0;
  // RST_STREAM frames a client may send in `reset_window`. A client
  // cancels at most the calls it made; with 100 streams at a time that is
  // far below this. 0: no limit.
  int max_resets_per_window = 2000;
  absl::Duration reset_window = absl::Seconds(10);
};

// The frame headers of one connection's client-to-server bytes.
class Http2FrameCounter {
 public:
  explicit Http2FrameCounter(const Http2Limits& limits) : limits_(limits) {}
  // Reads `size` more bytes the client sent. False once the connection has
  // broken a limit (why() says which); it stays false.
  bool Feed(const unsigned char* data, size_t size, absl::Time now);
  const std::string& why() const { return why_; }
  int64_t streams_opened() const { return streams_opened_; }
  bool settings_acked() const { return settings_acked_; }

 private:
  void OnFrameHeader(absl::Time now);

  Http2Limits limits_;
  size_t preface_left_ = 24;  // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
  unsigned char header_[9] = {};
  size_t header_have_ = 0;
  uint64_t payload_left_ = 0;
  uint32_t last_stream_id_ = 0;
  int64_t streams_opened_ = 0;
  bool settings_acked_ = false;
  absl::Time window_start_ = absl::InfinitePast();
  int64_t resets_in_window_ = 0;
  std::string why_;
};

// The process-wide registry recvmsg consults.
class Http2FrameGuard {
 public:
  static Http2FrameGuard& Get();

  // Inspects the connection accepted as `fd` (whose inode is `inode`) from
  // now on; replaces whatever `fd` held before.
  void Watch(int fd, ino_t inode, const Http2Limits& limits);
  // The client sent `size` bytes on `fd` into `message`'s buffers. False
  // when the connection broke a limit and must be closed (logged once).
  bool Received(int fd, const msghdr& message, size_t size);
  // Connections closed for breaking a limit, since start.
  int64_t closed() const { return closed_.load(std::memory_order_relaxed); }

 private:
  Http2FrameGuard() = default;
  struct Watched {
    ino_t inode = 0;
    Http2FrameCounter counter;
  };

  absl::Mutex mutex_;
  std::map<int, Watched> watched_ ABSL_GUARDED_BY(mutex_);
  // Skips the lookup while no connection is watched (the common case for
  // the client library and tools that link the server library).
  std::atomic<bool> any_{false};
  std::atomic<int64_t> closed_{0};
};

}  // namespace habitat
