// The memory requests in flight may take once parsed, shared by all of
// them: a trace parses into 9-35 times its wire size, so the message-size
// limit alone lets one upload inside it take a 1 GiB pod down. Each request
// reserves its parse estimate (EstimateParsedBytes) before it is parsed and
// holds it until it is answered (docs/operations.md, "Memory budget").
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/support/byte_buffer.h"

namespace habitat {

class RequestMemory {
 public:
  // Releases its bytes on destruction; after a large request it also hands
  // freed memory back to the system (malloc_trim), which glibc otherwise
  // keeps in the work threads' arenas.
  // A reservation may outlive the pool: a work thread can still be
  // releasing a finished call's captures while the server shuts down, so
  // it shares the count rather than pointing at the pool.
  struct Count {
    std::atomic<int64_t> in_use{0};
    int64_t trim_above = 0;
  };
  class Reservation {
   public:
    Reservation(std::shared_ptr<Count> count, int64_t bytes)
        : count_(std::move(count)), bytes_(bytes) {}
    ~Reservation();
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    int64_t bytes() const { return bytes_; }

   private:
    std::shared_ptr<Count> count_;
    int64_t bytes_;
  };

  // `limit_bytes` 0: no limit (reservations are still counted). Requests
  // estimated at `trim_above_bytes` or more trim the heap when released.
  RequestMemory(int64_t limit_bytes, int64_t trim_above_bytes)
      : limit_(limit_bytes), count_(std::make_shared<Count>()) {
    count_->trim_above = trim_above_bytes;
  }

  // Estimates what parsing `bytes` as a `type` takes and reserves it.
  // RESOURCE_EXHAUSTED naming --request_memory_mib and the excess when the
  // request alone is above the limit, or "server busy" when requests in
  // flight hold too much of it; INVALID_ARGUMENT for bytes that are not
  // protobuf.
  absl::StatusOr<std::unique_ptr<Reservation>> ReserveToParse(
      const google::protobuf::Descriptor& type, const grpc::ByteBuffer& bytes);

  int64_t in_use() const { return count_->in_use.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }

 private:
  const int64_t limit_;
  const std::shared_ptr<Count> count_;
};

}  // namespace habitat
