// The one place absl::Status becomes grpc::Status.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace habitat {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace habitat
