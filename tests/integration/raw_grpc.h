// Raw unary gRPC calls for the bad-input and security tests: bytes in, bytes
// out, over any channel (plaintext or TLS) with any metadata, so tests can
// send what no well-behaved client would (truncated protobuf, garbage) and
// talk to services without generated stubs (server reflection).
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

}  // namespace habitat::testing
