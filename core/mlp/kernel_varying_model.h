// The trained kernel-varying predictor (models/kernel_varying/, written by
// models/train.py, exported by models/export.py): an MLP from the features of
// features.h to log2(target pass time / origin pass time), and its manifest.
// The server evaluates the exported weights (model.json.gz) with its own
// forward pass, not LibTorch (see kernel_varying_model.cc for why).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/time_units.h"
#include "core/mlp/op_config.h"

namespace habitat {
namespace mlp {

class KernelVaryingModel {
 public:
  // Reads `model_dir`/manifest.json and `model_dir`/model.json.gz. Checks
  // the model file's sha256 against the manifest, the manifest's feature
  // version, feature names, families and coverage against features.h, and
  // that the layers map the features to the outputs. Errors name the file.
  static absl::StatusOr<std::unique_ptr<KernelVaryingModel>> Load(const std::string& model_dir);

  ~KernelVaryingModel();
  KernelVaryingModel(const KernelVaryingModel&) = delete;
  KernelVaryingModel& operator=(const KernelVaryingModel&) = delete;

  // One batched forward pass over `rows` rows of kFeatureCount features,
  // row-major. Returns one log2(target/origin) per row. Thread-safe; never
  // throws: INVALID_ARGUMENT for a wrong size or a non-finite feature,
  // INTERNAL for a non-finite output.
  absl::StatusOr<std::vector<double>> PredictLog2Ratios(const std::vector<float>& rows_flat,
                                                        size_t rows) const;

  // GPU ids (data/devices.textproto) the training pairs came from.
  const std::vector<std::string>& trained_gpus() const;
  // Precisions the family was trained in (empty if none).
  const std::vector<Precision>& trained_precisions(Family family) const;
  // Whether measurements on `gpu_id` trained this family in this precision
  // (the manifest's "coverage").
  bool TrainedOn(Family family, Precision precision, absl::string_view gpu_id) const;
  // Passes shorter than this were not trained on (launch-bound timings).
  Nanoseconds min_origin_ns() const;
  // Hex sha256 of model.json.gz, for logs and cache keys.
  const std::string& model_sha256() const;

 private:
  struct Impl;
  explicit KernelVaryingModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mlp
}  // namespace habitat
