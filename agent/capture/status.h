// A small status type for the agent's device-side code. The training
// machines have torch, CUDA and pybind11 but no Abseil, so the agent code
// that runs there cannot use absl::Status; this carries the same idea (a
// code and a message naming what failed) with nothing but the standard
// library.
#pragma once

#include <string>
#include <utility>

namespace habitat {
namespace agent {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kFailedPrecondition,
  kUnavailable,
  kPermissionDenied,
  kInternal,
};

class Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: <message>", or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status UnavailableError(std::string m) {
  return Status(StatusCode::kUnavailable, std::move(m));
}
inline Status PermissionDeniedError(std::string m) {
  return Status(StatusCode::kPermissionDenied, std::move(m));
}
inline Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

inline const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

inline std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace agent
}  // namespace habitat

#define HABITAT_AGENT_CONCAT_INNER_(a, b) a##b
#define HABITAT_AGENT_CONCAT_(a, b) HABITAT_AGENT_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define HABITAT_AGENT_RETURN_IF_ERROR(expr)                        \
  do {                                                             \
    ::habitat::agent::Status habitat_agent_status_ = (expr);       \
    if (!habitat_agent_status_.ok()) return habitat_agent_status_; \
  } while (false)
