// The gRPC frontend of PredictionBackend: one small handler per RPC on the
// callback API. It records metrics and converts statuses; all logic is in
// the backend.
#pragma once

#include "core/backend/prediction_backend.h"
#include "habitat/v1/prediction_service.grpc.pb.h"
#include "server/server_metrics.h"

namespace habitat {

class PredictionServiceImpl final : public habitat::v1::PredictionService::CallbackService {
 public:
  // Both must outlive the service.
  PredictionServiceImpl(PredictionBackend* backend, ServerMetrics* metrics)
      : backend_(backend), metrics_(metrics) {}

  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const habitat::v1::PredictRequest* request,
                                    habitat::v1::PredictResponse* response) override;
  grpc::ServerUnaryReactor* UploadTrace(grpc::CallbackServerContext* context,
                                        const habitat::v1::UploadTraceRequest* request,
                                        habitat::v1::UploadTraceResponse* response) override;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context,
                                        const habitat::v1::ListDevicesRequest* request,
                                        habitat::v1::ListDevicesResponse* response) override;
  grpc::ServerUnaryReactor* ListCatalogs(grpc::CallbackServerContext* context,
                                         const habitat::v1::ListCatalogsRequest* request,
                                         habitat::v1::ListCatalogsResponse* response) override;

 private:
  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, Rpc rpc,
                                   absl::Time started, const absl::Status& status);

  PredictionBackend* backend_;
  ServerMetrics* metrics_;
};

}  // namespace habitat
