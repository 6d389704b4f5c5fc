// Content-addressed trace ids: the same trace always gets the same id, so an
// upload retried after a lost acknowledgement does not store a copy.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// "sha256:" followed by 64 hex digits of the deterministic serialisation.
absl::StatusOr<std::string> ComputeTraceId(const habitat::v1::Trace& trace);

// True for strings of the form ComputeTraceId returns.
bool IsWellFormedTraceId(const std::string& id);
// INVALID_ARGUMENT, saying the form, unless IsWellFormedTraceId(id).
absl::Status CheckTraceId(const std::string& id);

}  // namespace habitat
