// A running prediction server: the gRPC service with health and reflection
// (plaintext or TLS), an optional plaintext health-only port for probes, and
// a Prometheus endpoint on its own port. Move-only handle; destroying it
// shuts the server down.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/backend/prediction_backend.h"
#include "server/tls_credentials.h"

namespace habitat {

struct ServerOptions {
  // host:port; port 0 picks a free port (see PredictionServer::port()).
  std::string address = "0.0.0.0:50051";
  // host:port for /metrics (plain HTTP); empty disables the endpoint.
  std::string metrics_address;
  // host:port of a plaintext port serving only grpc.health.v1, for probes
  // that cannot speak TLS (Kubernetes gRPC probes); empty disables it.
  std::string health_address;
  // Empty: plaintext gRPC.
  TlsOptions tls;
  // `tenant token` lines; empty turns authentication off (one anonymous
  // tenant).
  std::string token_file;
  BackendOptions backend;
  // Largest request accepted; larger ones get RESOURCE_EXHAUSTED.
  int max_receive_message_bytes = 64 << 20;
  // RPCs handled at once; more get RESOURCE_EXHAUSTED. 0: no limit.
  int max_concurrent_rpcs = 0;
  // Cap on one request's handling time; zero: the client's deadline only.
  absl::Duration max_request_time = absl::ZeroDuration();
  // How often habitat_stored_traces is re-read from the store, so that it
  // follows retention sweeps and other replicas' uploads, not only this
  // server's uploads. Must be positive.
  absl::Duration stored_traces_refresh = absl::Seconds(5);
};

class PredictionServer {
 public:
  // Errors name the flag or file at fault (bad TLS file, bad token file,
  // port in use, bad data directory).
  static absl::StatusOr<std::unique_ptr<PredictionServer>> Start(const ServerOptions& options);
  ~PredictionServer();

  PredictionServer(const PredictionServer&) = delete;
  PredictionServer& operator=(const PredictionServer&) = delete;

  int port() const;
  // 0 when metrics are disabled.
  int metrics_port() const;
  // 0 when there is no separate health port.
  int health_port() const;

  // Re-reads the token file (SIGHUP). On error the old tokens stay in force
  // and the status says why; FAILED_PRECONDITION when auth is off. Returns
  // the number of tokens now loaded.
  absl::StatusOr<size_t> ReloadTokens();

  // Stops accepting RPCs, marks health NOT_SERVING and waits up to `grace`
  // for in-flight RPCs before cancelling them.
  void Shutdown(absl::Duration grace);
  // Blocks until the server has shut down.
  void Wait();

 private:
  class Impl;
  explicit PredictionServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace habitat
