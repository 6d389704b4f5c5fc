// A running prediction server: gRPC service, health, reflection and a
// Prometheus endpoint on its own port. Move-only handle; destroying it shuts
// the server down.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/backend/prediction_backend.h"

namespace habitat {

struct ServerOptions {
  // host:port; port 0 picks a free port (see PredictionServer::port()).
  std::string address = "0.0.0.0:50051";
  // host:port for /metrics; empty disables the endpoint.
  std::string metrics_address;
  BackendOptions backend;
  // Largest request accepted; larger ones get RESOURCE_EXHAUSTED.
  int max_receive_message_bytes = 64 << 20;
};

class PredictionServer {
 public:
  static absl::StatusOr<std::unique_ptr<PredictionServer>> Start(const ServerOptions& options);
  ~PredictionServer();

  PredictionServer(const PredictionServer&) = delete;
  PredictionServer& operator=(const PredictionServer&) = delete;

  int port() const;
  // 0 when metrics are disabled.
  int metrics_port() const;

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
