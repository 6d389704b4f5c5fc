#include "client/cli_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/prediction_client.h"
#include "common/status_macros.h"
#include "core/backend/prediction_backend.h"
#include "core/store/trace_store.h"

namespace habitat {
namespace {

class RemoteService final : public CliService {
 public:
  explicit RemoteService(std::unique_ptr<PredictionClient> client) : client_(std::move(client)) {}
  absl::StatusOr<v1::PredictResponse> Predict(const v1::PredictRequest& request) override {
    return client_->Predict(request);
  }
  absl::StatusOr<v1::UploadTraceResponse> UploadTrace(
      const v1::UploadTraceRequest& request) override {
    return client_->UploadTrace(request);
  }
  absl::StatusOr<v1::ListDevicesResponse> ListDevices(
      const v1::ListDevicesRequest& request) override {
    return client_->ListDevices(request);
  }
  absl::StatusOr<v1::ListCatalogsResponse> ListCatalogs() override {
    return client_->ListCatalogs();
  }
  bool remote() const override { return true; }

 private:
  std::unique_ptr<PredictionClient> client_;
};

class EmbeddedService final : public CliService {
 public:
  explicit EmbeddedService(std::unique_ptr<PredictionBackend> backend)
      : backend_(std::move(backend)) {}
  absl::StatusOr<v1::PredictResponse> Predict(const v1::PredictRequest& request) override {
    return backend_->Predict(request);
  }
  absl::StatusOr<v1::UploadTraceResponse> UploadTrace(
      const v1::UploadTraceRequest& request) override {
    return backend_->UploadTrace(request);
  }
  absl::StatusOr<v1::ListDevicesResponse> ListDevices(
      const v1::ListDevicesRequest& request) override {
    return backend_->ListDevices(request);
  }
  absl::StatusOr<v1::ListCatalogsResponse> ListCatalogs() override {
    return backend_->ListCatalogs();
  }
  bool remote() const override { return false; }

 private:
  std::unique_ptr<PredictionBackend> backend_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CliService>> OpenCliService(const CliServiceOptions& options) {
  if (!options.server.empty()) {
    HABITAT_ASSIGN_OR_RETURN(auto client,
                             PredictionClient::Connect(options.server, options.client));
    return std::unique_ptr<CliService>(new RemoteService(std::move(client)));
  }
  BackendOptions backend_options;
  backend_options.data_dir = options.data_dir;
  backend_options.models_dir = options.models_dir;
  absl::StatusOr<std::unique_ptr<PredictionBackend>> backend =
      // Nothing outlives the process: the in-memory store, and no database.
      PredictionBackend::Create(backend_options, std::make_unique<InMemoryTraceStore>());
  if (!backend.ok()) {
    return absl::Status(backend.status().code(),
                        absl::StrCat("cannot load the GPU and price data from '", options.data_dir,
                                     "' (set --data-dir) or the models from '", options.models_dir,
                                     "' (set --models-dir): ", backend.status().message()));
  }
  return std::unique_ptr<CliService>(new EmbeddedService(std::move(*backend)));
}

}  // namespace habitat
