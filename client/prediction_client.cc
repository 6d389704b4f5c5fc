#include "client/prediction_client.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/file_io.h"
#include "common/grpc/grpc_status.h"
#include "common/status_macros.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace habitat {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  absl::StatusOr<std::string> pem = ReadFile(path);
  if (!pem.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the TLS ", what, ": ", pem.status().message()));
  }
  if (pem->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the TLS ", what, " '", path, "' is not a PEM file"));
  }
  return pem;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentials(
    const ClientTlsOptions& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client certificate needs both the certificate and the key file");
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca_file.empty()) {
    HABITAT_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(tls.ca_file, "CA file"));
  }
  if (!tls.cert_file.empty()) {
    HABITAT_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem(tls.cert_file, "certificate file"));
    HABITAT_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem(tls.key_file, "key file"));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

std::string RetryServiceConfig(const ClientOptions& options) {
  if (options.max_attempts <= 1) return "{}";
  // Seconds as the JSON form of google.protobuf.Duration ("0.100000000s").
  auto seconds = [](absl::Duration d) {
    return absl::StrFormat("%.9fs", absl::ToDoubleSeconds(d));
  };
  const absl::Duration max_backoff =
      options.initial_backoff * (int64_t{1} << (options.max_attempts - 2));
  return absl::StrCat(R"({"methodConfig":[{"name":[{"service":"habitat.v1.PredictionService"},)",
                      R"({"service":"grpc.health.v1.Health"}],"retryPolicy":{"maxAttempts":)",
                      options.max_attempts, R"(,"initialBackoff":")",
                      seconds(options.initial_backoff), R"(","maxBackoff":")", seconds(max_backoff),
                      R"(","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]})");
}

absl::StatusOr<std::unique_ptr<PredictionClient>> PredictionClient::Connect(
    const std::string& address, ClientOptions options) {
  if (address.empty()) {
    return absl::InvalidArgumentError("server address is empty; expected host:port");
  }
  if (options.max_attempts < 1 || options.max_attempts > kMaxClientAttempts) {
    return absl::InvalidArgumentError(absl::StrCat("ClientOptions.max_attempts must be 1 to ",
                                                   kMaxClientAttempts, " (gRPC's limit), got ",
                                                   options.max_attempts));
  }
  if (options.initial_backoff <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("ClientOptions.initial_backoff must be positive");
  }
  if (options.deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("ClientOptions.deadline must be positive");
  }
  if (options.max_message_bytes <= 0) {
    return absl::InvalidArgumentError("ClientOptions.max_message_bytes must be positive");
  }
  if (options.bearer_token.find_first_of(" \t\r\n") != std::string::npos) {
    return absl::InvalidArgumentError("the bearer token contains whitespace");
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
  // Ours, not one a DNS TXT record could substitute.
  args.SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  args.SetServiceConfigJSON(RetryServiceConfig(options));
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls.enabled) {
    HABITAT_ASSIGN_OR_RETURN(credentials, TlsCredentials(options.tls));
    if (!options.tls.server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls.server_name);
    }
  }
  auto channel = grpc::CreateCustomChannel(address, credentials, args);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create a channel to '", address, "'"));
  }
  auto stub = habitat::v1::PredictionService::NewStub(channel);
  return std::unique_ptr<PredictionClient>(
      new PredictionClient(address, std::move(options), channel, std::move(stub)));
}

PredictionClient::PredictionClient(std::string address, ClientOptions options,
                                   std::shared_ptr<grpc::Channel> channel,
                                   std::unique_ptr<habitat::v1::PredictionService::Stub> stub)
    : address_(std::move(address)),
      options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(std::move(stub)) {}

template <typename Response, typename Call>
absl::StatusOr<Response> PredictionClient::Invoke(const char* rpc_name, Call&& call) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(options_.deadline));
  context.set_wait_for_ready(options_.wait_for_ready);
  if (!options_.bearer_token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.bearer_token));
  }
  Response response{};
  const grpc::Status status = call(&context, &response);
  if (status.ok()) return response;
  const absl::Status converted = FromGrpcStatus(status);
  switch (converted.code()) {
    case absl::StatusCode::kUnavailable:
      return absl::UnavailableError(absl::StrCat(
          "cannot reach the prediction server at '", address_, "' (", rpc_name, ", ",
          options_.max_attempts == 1 ? "1 attempt"
                                     : absl::StrCat("up to ", options_.max_attempts, " attempts"),
          "): ", converted.message()));
    case absl::StatusCode::kDeadlineExceeded:
      return absl::DeadlineExceededError(
          absl::StrCat(rpc_name, " to '", address_, "' did not finish within ",
                       absl::FormatDuration(options_.deadline), ": ", converted.message()));
    default:
      return converted;
  }
}

absl::StatusOr<v1::PredictResponse> PredictionClient::Predict(const v1::PredictRequest& request) {
  return Invoke<v1::PredictResponse>(
      "Predict", [&](grpc::ClientContext* context, v1::PredictResponse* response) {
        return stub_->Predict(context, request, response);
      });
}

absl::StatusOr<v1::UploadTraceResponse> PredictionClient::UploadTrace(
    const v1::UploadTraceRequest& request) {
  return Invoke<v1::UploadTraceResponse>(
      "UploadTrace", [&](grpc::ClientContext* context, v1::UploadTraceResponse* response) {
        return stub_->UploadTrace(context, request, response);
      });
}

absl::StatusOr<v1::ListDevicesResponse> PredictionClient::ListDevices(
    const v1::ListDevicesRequest& request) {
  return Invoke<v1::ListDevicesResponse>(
      "ListDevices", [&](grpc::ClientContext* context, v1::ListDevicesResponse* response) {
        return stub_->ListDevices(context, request, response);
      });
}

absl::StatusOr<v1::ListCatalogsResponse> PredictionClient::ListCatalogs(
    const v1::ListCatalogsRequest& request) {
  return Invoke<v1::ListCatalogsResponse>(
      "ListCatalogs", [&](grpc::ClientContext* context, v1::ListCatalogsResponse* response) {
        return stub_->ListCatalogs(context, request, response);
      });
}

absl::StatusOr<int> PredictionClient::Health(const std::string& service) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  return Invoke<int>("Health.Check", [&](grpc::ClientContext* context, int* response) {
    grpc::health::v1::HealthCheckResponse reply;
    const grpc::Status status = health->Check(context, request, &reply);
    if (status.ok()) *response = reply.status();
    return status;
  });
}

}  // namespace habitat
