#include "server/request_memory.h"

#include <malloc.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/trace/parsed_size.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace habitat {
namespace {

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

RequestMemory::Reservation::~Reservation() {
  count_->in_use.fetch_sub(bytes_, std::memory_order_relaxed);
  // The parsed request is freed by now (its owner destroys it first); glibc
  // keeps freed chunks in the thread's arena until trimmed.
  if (count_->trim_above > 0 && bytes_ >= count_->trim_above) malloc_trim(0);
}

absl::StatusOr<std::unique_ptr<RequestMemory::Reservation>> RequestMemory::ReserveToParse(
    const google::protobuf::Descriptor& type, const grpc::ByteBuffer& bytes) {
  grpc::ByteBuffer copy(bytes);  // shares the slices; the reader consumes its input
  grpc::ProtoBufferReader reader(&copy);
  // Walked to the end even past the limit, so that the refusal says by how
  // much: it allocates nothing, and the wire bytes are bounded already.
  absl::StatusOr<int64_t> estimate = EstimateParsedBytes(type, &reader);
  if (!estimate.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request is not a valid ", type.full_name(),
                     " (truncated, not protobuf, or a string field that is not UTF-8)"));
  }
  const int64_t needed = *estimate;
  if (limit_ > 0 && needed > limit_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this request would take about ", MiB(needed), " of memory once parsed (",
                     MiB(static_cast<int64_t>(bytes.Length())),
                     " on the wire), above the server's per-request memory limit of ", MiB(limit_),
                     " (--request_memory_mib) by ", MiB(needed - limit_),
                     ": send a smaller trace (fewer operations, arguments or kernels)"));
  }
  const int64_t before = count_->in_use.fetch_add(needed, std::memory_order_relaxed);
  auto reservation = std::make_unique<Reservation>(count_, needed);
  if (limit_ > 0 && before + needed > limit_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "server busy: this request needs about ", MiB(needed), " of memory once parsed and ",
        "requests in flight hold ", MiB(before), " of the server's ", MiB(limit_),
        " (--request_memory_mib); retry with backoff"));
  }
  return reservation;
}

}  // namespace habitat
