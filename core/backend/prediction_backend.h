// The service's logic on request/response messages, with no transport: the
// gRPC server and the CLI's embedded mode both call this, so they answer
// the same requests the same way.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/devices/device_database.h"
#include "core/predict/prediction_engine.h"
#include "core/pricing/price_catalog.h"
#include "core/store/trace_store.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

struct BackendOptions {
  // Holds devices.textproto and catalogs/*.textproto.
  std::string data_dir;
  // Empty: traces are kept in memory only.
  std::string trace_dir;
  size_t cache_entries = 4096;
};

class PredictionBackend {
 public:
  // Loads and validates the GPU spec database and price catalogs; any error
  // names the file and field so a bad deployment fails at start-up.
  static absl::StatusOr<std::unique_ptr<PredictionBackend>> Create(
      const BackendOptions& options);

  absl::StatusOr<habitat::v1::PredictResponse> Predict(
      const habitat::v1::PredictRequest& request, PredictionStats* stats = nullptr);
  absl::StatusOr<habitat::v1::UploadTraceResponse> UploadTrace(
      const habitat::v1::UploadTraceRequest& request);
  habitat::v1::ListDevicesResponse ListDevices(
      const habitat::v1::ListDevicesRequest& request) const;
  habitat::v1::ListCatalogsResponse ListCatalogs() const;

  const DeviceDatabase& devices() const { return devices_; }
  TraceStore& store() { return *store_; }
  const PredictionCache& cache() const { return *cache_; }

 private:
  PredictionBackend(DeviceDatabase devices, CatalogSet catalogs,
                    std::unique_ptr<TraceStore> store, size_t cache_entries);

  DeviceDatabase devices_;
  CatalogSet catalogs_;
  std::unique_ptr<TraceStore> store_;
  std::shared_ptr<PredictionCache> cache_;
  PredictionEngine engine_;
};

}  // namespace habitat
