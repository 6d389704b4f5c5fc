// grpc.health.v1.Health/Check through the generated stub, as probes and
// clients call it.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace habitat::testing {

// Check for `service` ("" = the whole server) on `channel`: the
// ServingStatus number (1 SERVING, 2 NOT_SERVING); the call's error when
// it failed.
absl::StatusOr<int> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                absl::Duration deadline, const std::string& service = "");

// The same on a plaintext connection of its own to `address`, not one
// shared through gRPC's global subchannel pool, so that each check
// exercises the listener.
absl::StatusOr<int> CheckHealth(const std::string& address, absl::Duration deadline,
                                const std::string& service = "");

}  // namespace habitat::testing
