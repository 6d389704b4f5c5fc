// Where the CLI's requests go: a remote server (PredictionClient) or the
// prediction backend run in-process (the default, needs no server). Both
// take and return the same messages, so output does not depend on the mode.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/prediction_client.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

class CliService {
 public:
  virtual ~CliService() = default;
  virtual absl::StatusOr<habitat::v1::PredictResponse> Predict(
      const habitat::v1::PredictRequest& request) = 0;
  virtual absl::StatusOr<habitat::v1::UploadTraceResponse> UploadTrace(
      const habitat::v1::UploadTraceRequest& request) = 0;
  virtual absl::StatusOr<habitat::v1::ListDevicesResponse> ListDevices(
      const habitat::v1::ListDevicesRequest& request) = 0;
  virtual absl::StatusOr<habitat::v1::ListCatalogsResponse> ListCatalogs() = 0;
  // True for a remote server (traces can be referred to by id there).
  virtual bool remote() const = 0;
};

struct CliServiceOptions {
  // host:port of a habitat-server; empty runs the backend in-process.
  std::string server;
  // Embedded mode: the directory with devices.textproto and catalogs/.
  std::string data_dir;
  // Embedded mode: the directory with kernel_varying/; empty runs without
  // the kernel-varying predictor.
  std::string models_dir;
  // Remote mode: deadline, token and TLS settings.
  ClientOptions client;
};

absl::StatusOr<std::unique_ptr<CliService>> OpenCliService(const CliServiceOptions& options);

}  // namespace habitat
