#include "core/backend/prediction_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "core/trace/trace_id.h"
#include "core/trace/trace_validation.h"

namespace habitat {

absl::StatusOr<std::unique_ptr<PredictionBackend>> PredictionBackend::Create(
    const BackendOptions& options) {
  HABITAT_ASSIGN_OR_RETURN(DeviceDatabase devices,
                           DeviceDatabase::LoadFromFile(options.data_dir + "/devices.textproto"));
  HABITAT_ASSIGN_OR_RETURN(CatalogSet catalogs,
                           CatalogSet::LoadFromDirectory(options.data_dir + "/catalogs", devices));
  std::unique_ptr<TraceStore> store;
  if (options.trace_dir.empty()) {
    store = std::make_unique<InMemoryTraceStore>();
  } else {
    HABITAT_ASSIGN_OR_RETURN(store, DirectoryTraceStore::Open(options.trace_dir));
  }
  return std::unique_ptr<PredictionBackend>(new PredictionBackend(
      std::move(devices), std::move(catalogs), std::move(store), options.cache_entries));
}

PredictionBackend::PredictionBackend(DeviceDatabase devices, CatalogSet catalogs,
                                     std::unique_ptr<TraceStore> store,
                                     size_t cache_entries)
    : devices_(std::move(devices)),
      catalogs_(std::move(catalogs)),
      store_(std::move(store)),
      cache_(std::make_shared<PredictionCache>(cache_entries)),
      engine_(&devices_, cache_) {}

absl::StatusOr<v1::PredictResponse> PredictionBackend::Predict(
    const v1::PredictRequest& request, PredictionStats* stats) {
  std::shared_ptr<const v1::Trace> trace;
  std::string trace_id;
  switch (request.trace_source_case()) {
    case v1::PredictRequest::kTrace:
      // Aliasing pointer: no copy of a possibly large inline trace.
      trace = std::shared_ptr<const v1::Trace>(std::shared_ptr<void>(), &request.trace());
      break;
    case v1::PredictRequest::kTraceId: {
      if (!IsWellFormedTraceId(request.trace_id())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "trace_id '", request.trace_id(), "' is not of the form sha256:<64 hex digits>"));
      }
      HABITAT_ASSIGN_OR_RETURN(trace, store_->Get(request.trace_id()));
      trace_id = request.trace_id();
      break;
    }
    default:
      return absl::InvalidArgumentError(
          "the request needs a trace: set `trace` or `trace_id` (from UploadTrace)");
  }

  PredictionQuery query;
  query.devices.assign(request.devices().begin(), request.devices().end());
  query.include_breakdown = request.include_breakdown();
  // Stored traces were validated by UploadTrace.
  query.trace_already_validated = !trace_id.empty();
  if (!v1::PriceKind_IsValid(request.price_kind())) {
    return absl::InvalidArgumentError(
        absl::StrCat("price_kind ", request.price_kind(), " is not a known PriceKind"));
  }
  query.price_kind = request.price_kind() == v1::PRICE_KIND_UNSPECIFIED
                         ? v1::PRICE_KIND_ON_DEMAND
                         : request.price_kind();
  if (request.pricing_case() == v1::PredictRequest::kCatalog && !request.catalog().empty()) {
    HABITAT_ASSIGN_OR_RETURN(query.catalog, catalogs_.Get(request.catalog()));
  } else if (request.pricing_case() == v1::PredictRequest::kInlineCatalog) {
    HABITAT_RETURN_IF_ERROR(ValidateCatalog(request.inline_catalog(), devices_));
    query.catalog = &request.inline_catalog();
  }
  return engine_.Predict(*trace, std::move(trace_id), query, stats);
}

absl::StatusOr<v1::UploadTraceResponse> PredictionBackend::UploadTrace(
    const v1::UploadTraceRequest& request) {
  if (!request.has_trace()) {
    return absl::InvalidArgumentError("UploadTrace needs `trace`");
  }
  HABITAT_RETURN_IF_ERROR(ValidateTrace(request.trace()));
  // Reject traces we could never predict from before storing them.
  HABITAT_RETURN_IF_ERROR(engine_.ResolveOrigin(request.trace()).status());
  HABITAT_ASSIGN_OR_RETURN(StoredTrace stored, store_->Put(request.trace()));
  v1::UploadTraceResponse response;
  response.set_trace_id(stored.id);
  response.set_created(stored.created);
  return response;
}

v1::ListDevicesResponse PredictionBackend::ListDevices(
    const v1::ListDevicesRequest& request) const {
  v1::ListDevicesResponse response;
  for (const auto& spec : devices_.devices()) {
    if (spec.test_only() && !request.include_test_only()) continue;
    *response.add_devices() = spec;
  }
  return response;
}

v1::ListCatalogsResponse PredictionBackend::ListCatalogs() const {
  v1::ListCatalogsResponse response;
  for (const auto& catalog : catalogs_.catalogs()) *response.add_catalogs() = catalog;
  return response;
}

}  // namespace habitat
