// The trained kernel-varying predictor (models/kernel_varying/, written by
// models/train.py): gradient-boosted trees from the features of features.h
// to the log2 correction of the roofline ratio, served with XGBoost's C API,
// and the manifest that says what the trees were trained on.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/time_units.h"
#include "core/kernel_varying/op_config.h"
#include "core/trace/math_mode.h"

namespace habitat {
namespace kernel_varying {

class KernelVaryingModel {
 public:
  // Reads `model_dir`/manifest.json and the model file it names
  // ("model_file": gzipped XGBoost JSON). Checks the file's sha256 against
  // "model_sha256", and "feature_version", "feature_names", "families" and
  // "modes" against features.h; reads "coverage", "expected_error",
  // "min_origin_ns", "large_gemm_ceiling" and "large_gemm_typical". Errors name the file.
  static absl::StatusOr<std::unique_ptr<KernelVaryingModel>> Load(const std::string& model_dir);

  ~KernelVaryingModel();
  KernelVaryingModel(const KernelVaryingModel&) = delete;
  KernelVaryingModel& operator=(const KernelVaryingModel&) = delete;

  // The model's output for `rows` rows of kFeatureCount features, row-major:
  // the log2 correction of each row's roofline ratio. Thread-safe; never
  // throws: INVALID_ARGUMENT for a wrong size or a non-finite feature,
  // INTERNAL when XGBoost fails or returns a non-finite value.
  absl::StatusOr<std::vector<double>> PredictLog2Corrections(const std::vector<float>& rows_flat,
                                                             size_t rows) const;

  // Whether measurements on `gpu_id` of this family in this math mode were
  // in the training data (the manifest's "coverage").
  bool TrainedOn(Family family, MathMode mode, absl::string_view gpu_id) const;
  // The error (MAPE, %) the held-out evaluation measured for the family on
  // this target GPU; the manifest's default for GPUs or families it did not
  // evaluate.
  double ExpectedErrorPercent(Family family, absl::string_view target_gpu_id) const;
  // The error (MAPE, %) of moving a pass of the family from `origin_mode`
  // to a target that runs it in another mode (models/mode_change.py, on
  // Hopper); the manifest's default where that was not measured.
  double ModeChangeErrorPercent(Family family, MathMode origin_mode) const;
  // Passes shorter than this were not trained on (launch-bound timings).
  Nanoseconds min_origin_ns() const;
  // The most a large fp32 GEMM (LargeGemmRooflineNs) may be predicted at, as
  // a multiple of its sustained roofline: what the measured GPUs reached
  // (models/train.py's large_gemm_ceiling). At least 1.
  double large_gemm_ceiling() const;
  // The multiple of its sustained roofline a large fp32 GEMM typically runs
  // at: the median over the measured GPUs of each one's median over such
  // passes (models/train.py's large_gemm_multiple). Between 1 and
  // large_gemm_ceiling().
  double large_gemm_typical() const;
  // Hex sha256 of the model file, for logs and cache keys.
  const std::string& model_sha256() const;

 private:
  struct Impl;
  explicit KernelVaryingModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernel_varying
}  // namespace habitat
