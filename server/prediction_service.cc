#include "server/prediction_service.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/grpc_status.h"

namespace habitat {
namespace {

// The backend reports errors as statuses; this is the last line of defence
// so that nothing a request does can take the server down.
template <typename Fn>
absl::Status Guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("internal error: ", e.what()));
  } catch (...) {
    return absl::InternalError("internal error");
  }
}

}  // namespace

grpc::ServerUnaryReactor* PredictionServiceImpl::Finish(grpc::CallbackServerContext* context,
                                                        Rpc rpc, absl::Time started,
                                                        const absl::Status& status) {
  metrics_->RecordRequest(rpc, status.code(), absl::ToDoubleSeconds(absl::Now() - started));
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* PredictionServiceImpl::Predict(
    grpc::CallbackServerContext* context, const v1::PredictRequest* request,
    v1::PredictResponse* response) {
  const absl::Time started = absl::Now();
  PredictionStats stats;
  absl::Status status = Guarded([&]() -> absl::Status {
    auto result = backend_->Predict(*request, &stats);
    if (!result.ok()) return result.status();
    *response = std::move(*result);
    return absl::OkStatus();
  });
  metrics_->RecordCache(stats.cache_hits, stats.cache_misses);
  for (int method = 0; method < 5; ++method) {
    metrics_->RecordPredictions(method, stats.operations_by_method[method]);
  }
  return Finish(context, Rpc::kPredict, started, status);
}

grpc::ServerUnaryReactor* PredictionServiceImpl::UploadTrace(
    grpc::CallbackServerContext* context, const v1::UploadTraceRequest* request,
    v1::UploadTraceResponse* response) {
  const absl::Time started = absl::Now();
  absl::Status status = Guarded([&]() -> absl::Status {
    auto result = backend_->UploadTrace(*request);
    if (!result.ok()) return result.status();
    *response = std::move(*result);
    return absl::OkStatus();
  });
  metrics_->SetStoredTraces(static_cast<double>(backend_->store().size()));
  return Finish(context, Rpc::kUploadTrace, started, status);
}

grpc::ServerUnaryReactor* PredictionServiceImpl::ListDevices(
    grpc::CallbackServerContext* context, const v1::ListDevicesRequest* request,
    v1::ListDevicesResponse* response) {
  const absl::Time started = absl::Now();
  *response = backend_->ListDevices(*request);
  return Finish(context, Rpc::kListDevices, started, absl::OkStatus());
}

grpc::ServerUnaryReactor* PredictionServiceImpl::ListCatalogs(
    grpc::CallbackServerContext* context, const v1::ListCatalogsRequest* request,
    v1::ListCatalogsResponse* response) {
  const absl::Time started = absl::Now();
  *response = backend_->ListCatalogs();
  return Finish(context, Rpc::kListCatalogs, started, absl::OkStatus());
}

}  // namespace habitat
