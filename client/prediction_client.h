// A C++ client of habitat.v1.PredictionService: one method per RPC, gRPC
// statuses converted to absl::Status, UNAVAILABLE retried a bounded number of
// times (every RPC of the service is idempotent: UploadTrace stores content
// under its hash, so a repeated upload is a no-op).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "habitat/v1/prediction_service.grpc.pb.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

// Transport security for the channel. Off: plaintext (loopback, or a
// trusted network behind a TLS-terminating proxy).
struct ClientTlsOptions {
  bool enabled = false;
  // PEM CA certificates that sign the server's certificate; empty: the
  // system's roots.
  std::string ca_file;
  // PEM client certificate chain and key, for servers that require client
  // certificates; both or neither.
  std::string cert_file;
  std::string key_file;
  // Name to verify the server certificate against instead of the host in
  // the address (e.g. connecting by IP to a server whose certificate names
  // a DNS name).
  std::string server_name;
};

// gRPC caps a retry policy's maxAttempts at 5.
inline constexpr int kMaxClientAttempts = 5;

struct ClientOptions {
  // For the whole call, retries included.
  absl::Duration deadline = absl::Seconds(30);
  // Largest message sent or received.
  int max_message_bytes = 64 << 20;
  // true: an attempt waits (up to the deadline) for the channel to connect
  // instead of failing fast with UNAVAILABLE.
  bool wait_for_ready = false;
  // Attempts per call, counting the first, 1 to kMaxClientAttempts; only
  // UNAVAILABLE (the call reached no handler, or the connection dropped) is
  // retried, by gRPC's own retry policy (RetryServiceConfig).
  int max_attempts = 3;
  // gRPC waits a random time up to this before the second attempt, up to
  // twice it before the third, and so on.
  absl::Duration initial_backoff = absl::Milliseconds(100);
  // Sent as `authorization: Bearer <token>` on every call; empty: none.
  std::string bearer_token;
  ClientTlsOptions tls;
};

// The channel's service config: gRPC retries UNAVAILABLE on every method of
// the prediction and health services, `options.max_attempts` attempts with
// exponential backoff from `options.initial_backoff`; no retry policy for
// one attempt.
std::string RetryServiceConfig(const ClientOptions& options);

class PredictionClient {
 public:
  // Creates a channel to `address` (host:port), plaintext or TLS per
  // `options.tls`. Connecting is lazy: an unreachable server shows up as
  // UNAVAILABLE on the first call. INVALID_ARGUMENT for an empty address or
  // bad options; a TLS file that cannot be read is named in the error.
  static absl::StatusOr<std::unique_ptr<PredictionClient>> Connect(const std::string& address,
                                                                   ClientOptions options = {});

  absl::StatusOr<habitat::v1::PredictResponse> Predict(const habitat::v1::PredictRequest& request);
  absl::StatusOr<habitat::v1::UploadTraceResponse> UploadTrace(
      const habitat::v1::UploadTraceRequest& request);
  absl::StatusOr<habitat::v1::ListDevicesResponse> ListDevices(
      const habitat::v1::ListDevicesRequest& request = {});
  absl::StatusOr<habitat::v1::ListCatalogsResponse> ListCatalogs(
      const habitat::v1::ListCatalogsRequest& request = {});

  // grpc.health.v1.Health/Check for `service` ("" is the whole server):
  // 1 SERVING, 2 NOT_SERVING (draining, or its listener lost), 3
  // SERVICE_UNKNOWN. Health needs no token; one is sent if set.
  absl::StatusOr<int> Health(const std::string& service = "");

  // The client is safe to share between threads.
  const std::string& address() const { return address_; }

 private:
  PredictionClient(std::string address, ClientOptions options,
                   std::shared_ptr<grpc::Channel> channel,
                   std::unique_ptr<habitat::v1::PredictionService::Stub> stub);

  // Runs `call(context, response)` with the deadline and token; the channel
  // retries.
  template <typename Response, typename Call>
  absl::StatusOr<Response> Invoke(const char* rpc_name, Call&& call);

  std::string address_;
  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<habitat::v1::PredictionService::Stub> stub_;
};

}  // namespace habitat
