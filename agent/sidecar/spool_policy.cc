// The decisions of the spool uploader that need no I/O: backoff delays,
// which errors are permanent, and what a spool file is.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "agent/sidecar/spool.h"
#include "common/file_io.h"
#include "common/json_text.h"

namespace habitat::agent {

absl::Duration BackoffDelay(const BackoffPolicy& policy, int failures, absl::BitGen& random) {
  absl::Duration delay = policy.initial;
  // Doubling stops at the cap, so no overflow however long the outage.
  for (int i = 1; i < failures && delay < policy.max; ++i) delay *= 2;
  delay = std::min(delay, policy.max);
  const double fraction = absl::Uniform(random, 0.5, 1.0);
  return delay * fraction;
}

ErrorClass ClassifyUploadError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
      return ErrorClass::kPermanent;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return ErrorClass::kServerDown;
    default:
      return ErrorClass::kRetryFile;
  }
}

absl::StatusOr<habitat::v1::Trace> ParseSpoolTrace(const std::string& path,
                                                   const std::string& bytes, size_t max_bytes) {
  if (bytes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is empty"));
  }
  std::string inflated;
  const std::string* data = &bytes;
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
      static_cast<unsigned char>(bytes[1]) == 0x8b) {
    // Bounded: a small foreign file must not exhaust the sidecar's memory
    // (and crash-loop it).
    auto result = Gunzip(bytes, max_bytes);
    if (absl::IsResourceExhausted(result.status())) {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "' ", result.status().message(),
                                                     ", more than the largest upload"));
    }
    if (!result.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "' is gzip data that does not inflate (",
                       result.status().message(), "); the file is truncated or corrupt"));
    }
    inflated = std::move(*result);
    data = &inflated;
  } else if (bytes.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is ", bytes.size(),
                                                   " bytes, more than the largest upload (",
                                                   max_bytes, " bytes)"));
  }
  if (StartsLikeJson(*data)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path,
                     "' is JSON (a torch.profiler trace?), not a binary habitat.v1.Trace; "
                     "convert it with `habitat import-kineto` first"));
  }
  habitat::v1::Trace trace;
  if (!trace.ParseFromString(*data)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' (", data->size(),
        " bytes) does not parse as a habitat.v1.Trace: it is truncated or not a trace file"));
  }
  return trace;
}

}  // namespace habitat::agent
