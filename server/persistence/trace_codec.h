// How the SQL stores keep a trace: the gzip of its serialisation, with the
// serialised size beside it as a check on read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

struct EncodedTrace {
  std::string id;          // ComputeTraceId
  std::string blob;        // gzip of the serialised trace
  int64_t size_bytes = 0;  // serialised (uncompressed) size
};

absl::StatusOr<EncodedTrace> EncodeTrace(const habitat::v1::Trace& trace);

// DATA_LOSS naming `where` (store and id) when the blob does not inflate,
// has the wrong size or does not parse.
absl::StatusOr<std::shared_ptr<const habitat::v1::Trace>> DecodeTrace(absl::string_view blob,
                                                                      int64_t size_bytes,
                                                                      const std::string& where);

}  // namespace habitat
