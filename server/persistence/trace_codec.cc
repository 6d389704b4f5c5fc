#include "server/persistence/trace_codec.h"

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/trace/trace_id.h"

namespace habitat {

absl::StatusOr<EncodedTrace> EncodeTrace(const v1::Trace& trace) {
  EncodedTrace encoded;
  HABITAT_ASSIGN_OR_RETURN(encoded.id, ComputeTraceId(trace));
  std::string bytes;
  if (!trace.SerializeToString(&bytes)) {
    return absl::InvalidArgumentError("trace cannot be serialised");
  }
  encoded.size_bytes = static_cast<int64_t>(bytes.size());
  HABITAT_ASSIGN_OR_RETURN(encoded.blob, Gzip(bytes));
  return encoded;
}

absl::StatusOr<std::shared_ptr<const v1::Trace>> DecodeTrace(absl::string_view blob,
                                                             int64_t size_bytes,
                                                             const std::string& where) {
  auto bytes = Gunzip(blob);
  if (!bytes.ok()) {
    return absl::DataLossError(
        absl::StrCat(where, " is corrupt: its data does not inflate: ", bytes.status().message()));
  }
  if (static_cast<int64_t>(bytes->size()) != size_bytes) {
    return absl::DataLossError(absl::StrCat(where, " is corrupt: ", bytes->size(), " bytes where ",
                                            size_bytes, " were stored"));
  }
  auto trace = std::make_shared<v1::Trace>();
  if (!trace->ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat(where, " is corrupt: it does not parse as a Trace"));
  }
  return std::shared_ptr<const v1::Trace>(std::move(trace));
}

}  // namespace habitat
