#include "server/prediction_server.h"

#include <chrono>
#include <exception>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "server/prediction_service.h"
#include "server/server_metrics.h"

namespace habitat {

class PredictionServer::Impl {
 public:
  std::unique_ptr<PredictionBackend> backend;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<ServerMetrics> metrics;
  std::unique_ptr<prometheus::Exposer> exposer;
  std::unique_ptr<PredictionServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  int metrics_port = 0;
  bool shut_down = false;
};

PredictionServer::PredictionServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PredictionServer::~PredictionServer() {
  if (impl_ != nullptr && !impl_->shut_down) Shutdown(absl::Seconds(1));
}

absl::StatusOr<std::unique_ptr<PredictionServer>> PredictionServer::Start(
    const ServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  HABITAT_ASSIGN_OR_RETURN(impl->backend, PredictionBackend::Create(options.backend));
  impl->metrics = std::make_unique<ServerMetrics>(*impl->registry);
  impl->metrics->SetDevicesLoaded(static_cast<double>(impl->backend->devices().devices().size()));
  impl->metrics->SetStoredTraces(static_cast<double>(impl->backend->store().size()));
  if (!options.metrics_address.empty()) {
    try {
      impl->exposer = std::make_unique<prometheus::Exposer>(options.metrics_address);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(
          "cannot serve metrics on '", options.metrics_address, "': ", e.what()));
    }
    impl->exposer->RegisterCollectable(impl->registry);
    auto ports = impl->exposer->GetListeningPorts();
    impl->metrics_port = ports.empty() ? 0 : ports.front();
  }
  impl->service = std::make_unique<PredictionServiceImpl>(impl->backend.get(), impl->metrics.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &impl->port);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(options.max_receive_message_bytes);
  builder.RegisterService(impl->service.get());
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on '", options.address, "' (in use or not an address?)"));
  }
  impl->server->GetHealthCheckService()->SetServingStatus(true);
  return std::unique_ptr<PredictionServer>(new PredictionServer(std::move(impl)));
}

int PredictionServer::port() const { return impl_->port; }
int PredictionServer::metrics_port() const { return impl_->metrics_port; }

void PredictionServer::Shutdown(absl::Duration grace) {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  impl_->server->GetHealthCheckService()->SetServingStatus(false);
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          absl::ToChronoMilliseconds(grace));
}

void PredictionServer::Wait() { impl_->server->Wait(); }

}  // namespace habitat
