// What a message's wire bytes take in memory once parsed, estimated from the
// bytes alone: a trace parses into 9-22 times its wire size (each empty
// argument is 2 bytes on the wire and a heap-allocated message of ~72 bytes
// in memory), so a request within the message-size limit can still be more
// than a server holds. Walking the bytes allocates nothing, so the server
// refuses such a request before parsing it.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/zero_copy_stream.h"

namespace habitat {

// Bytes parsing `input` as a `type` would allocate: each message as its
// generated class's size, each repeated element's slot, each heap string,
// each allocation's malloc overhead. An upper-side estimate (within 2x of
// SpaceUsedLong plus malloc overhead on real traces). Stops early once the
// estimate passes `stop_above` (returns what it had, which is then above
// it). INVALID_ARGUMENT when the bytes are not well-formed protobuf.
absl::StatusOr<int64_t> EstimateParsedBytes(const google::protobuf::Descriptor& type,
                                            google::protobuf::io::ZeroCopyInputStream* input,
                                            int64_t stop_above = INT64_MAX);
absl::StatusOr<int64_t> EstimateParsedBytes(const google::protobuf::Descriptor& type,
                                            absl::string_view wire, int64_t stop_above = INT64_MAX);

// What `message` holds in memory: SpaceUsedLong plus a malloc overhead per
// submessage, the measure the caches charge (the serialised size misses
// most of it).
int64_t InMemoryBytes(const google::protobuf::Message& message);

}  // namespace habitat
