#include "core/trace/trace_id.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace habitat {

namespace {
constexpr char kPrefix[] = "sha256:";
}  // namespace

absl::StatusOr<std::string> ComputeTraceId(const habitat::v1::Trace& trace) {
  std::string bytes;
  {
    // Deterministic so that map fields (metadata) hash the same every time.
    google::protobuf::io::StringOutputStream output(&bytes);
    google::protobuf::io::CodedOutputStream coded(&output);
    coded.SetSerializationDeterministic(true);
    if (!trace.SerializeToCodedStream(&coded)) {
      return absl::InvalidArgumentError("trace cannot be serialised (too large?)");
    }
  }
  return std::string(kPrefix) + Sha256Hex(bytes);
}

bool IsWellFormedTraceId(const std::string& id) {
  const size_t prefix_len = sizeof(kPrefix) - 1;
  if (id.size() != prefix_len + 64) return false;  // 64 hex digits
  if (!absl::StartsWith(id, kPrefix)) return false;
  for (size_t i = prefix_len; i < id.size(); ++i) {
    const char c = id[i];
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

absl::Status CheckTraceId(const std::string& id) {
  if (IsWellFormedTraceId(id)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("trace_id '", id, "' is not of the form sha256:<64 hex digits>"));
}

}  // namespace habitat
