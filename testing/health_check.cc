#include "testing/health_check.h"

#include "absl/time/clock.h"
#include "common/grpc/grpc_status.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace habitat::testing {

absl::StatusOr<int> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                absl::Duration deadline, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return static_cast<int>(response.status());
}

absl::StatusOr<int> CheckHealth(const std::string& address, absl::Duration deadline,
                                const std::string& service) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return CheckHealth(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args),
                     deadline, service);
}

}  // namespace habitat::testing
