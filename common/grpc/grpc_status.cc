#include "common/grpc/grpc_status.h"

#include <string>

namespace habitat {
namespace {

// Both enums are the canonical codes, so converting is a cast; these
// assertions keep it honest.
#define HABITAT_SAME_CODE(name, grpc_name)                                                       \
  static_assert(                                                                                 \
      static_cast<int>(absl::StatusCode::name) == static_cast<int>(grpc::StatusCode::grpc_name), \
      #name " differs between absl and gRPC")
HABITAT_SAME_CODE(kOk, OK);
HABITAT_SAME_CODE(kCancelled, CANCELLED);
HABITAT_SAME_CODE(kUnknown, UNKNOWN);
HABITAT_SAME_CODE(kInvalidArgument, INVALID_ARGUMENT);
HABITAT_SAME_CODE(kDeadlineExceeded, DEADLINE_EXCEEDED);
HABITAT_SAME_CODE(kNotFound, NOT_FOUND);
HABITAT_SAME_CODE(kAlreadyExists, ALREADY_EXISTS);
HABITAT_SAME_CODE(kPermissionDenied, PERMISSION_DENIED);
HABITAT_SAME_CODE(kResourceExhausted, RESOURCE_EXHAUSTED);
HABITAT_SAME_CODE(kFailedPrecondition, FAILED_PRECONDITION);
HABITAT_SAME_CODE(kAborted, ABORTED);
HABITAT_SAME_CODE(kOutOfRange, OUT_OF_RANGE);
HABITAT_SAME_CODE(kUnimplemented, UNIMPLEMENTED);
HABITAT_SAME_CODE(kInternal, INTERNAL);
HABITAT_SAME_CODE(kUnavailable, UNAVAILABLE);
HABITAT_SAME_CODE(kDataLoss, DATA_LOSS);
HABITAT_SAME_CODE(kUnauthenticated, UNAUTHENTICATED);
#undef HABITAT_SAME_CODE

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace habitat
