// Raw unary gRPC calls for the bad-input and security tests: bytes in, bytes
// out, over any channel (plaintext or TLS) with any metadata, so tests can
// send what no well-behaved client would (truncated protobuf, garbage) and
// talk to services without generated stubs (grpc.health.v1).
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace habitat::testing {

struct RawResult {
  grpc::Status status;
  std::string response;
};

using Metadata = std::vector<std::pair<std::string, std::string>>;

inline RawResult RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                              const std::string& method, const std::string& request_bytes,
                              const Metadata& metadata = {}, int deadline_seconds = 30) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_seconds));
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  RawResult result;
  result.status = done.get_future().get();
  std::vector<grpc::Slice> slices;
  if (result.status.ok() && response.Dump(&slices).ok()) {
    for (const auto& s : slices) {
      result.response.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return result;
}

// grpc.health.v1.Health/Check of the whole server: the ServingStatus
// (1 SERVING, 2 NOT_SERVING), or -1 with `status` set when the call failed.
inline int HealthCheckOn(const std::shared_ptr<grpc::Channel>& channel,
                         grpc::Status* status = nullptr) {
  RawResult result = RawUnaryCall(channel, "/grpc.health.v1.Health/Check", "", {}, 10);
  if (status != nullptr) *status = result.status;
  if (!result.status.ok()) return -1;
  // HealthCheckResponse { ServingStatus status = 1; }: empty when UNKNOWN.
  if (result.response.size() == 2 && result.response[0] == 0x08) return result.response[1];
  return result.response.empty() ? 0 : -1;
}

}  // namespace habitat::testing
