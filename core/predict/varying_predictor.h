// Predicts the passes of kernel-varying operations (convolutions, matrix
// multiplies, LSTMs, attention) with the trained model of core/mlp, for all
// target GPUs of a request in one batched forward pass.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/time_units.h"
#include "core/mlp/kernel_varying_model.h"
#include "habitat/v1/device.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

struct VaryingPassPrediction {
  Nanoseconds predicted_ns = 0;
  // The model's training data had measurements on the target GPU in this
  // family and precision; false means it extrapolated from the GPU's specs.
  bool trained_on_target = false;
};

// Key: 2 * operation index + (1 for the backward pass). Passes without an
// entry are not covered by the model (no signature, or shorter than the
// model's min_origin_ns); the engine wave-scales their kernels.
using VaryingPassTable = absl::flat_hash_map<int, VaryingPassPrediction>;

inline int VaryingPassKey(int op_index, bool backward) { return 2 * op_index + (backward ? 1 : 0); }

class VaryingPredictor {
 public:
  // Loads `model_dir` (models/kernel_varying: model.json.gz, manifest.json
  // with its "coverage"); errors name the file. `memo_entries` bounds the memo of
  // model outputs per (op signature, pass, origin time, origin GPU, target).
  static absl::StatusOr<std::unique_ptr<VaryingPredictor>> Load(const std::string& model_dir,
                                                                size_t memo_entries);
  VaryingPredictor(std::shared_ptr<const mlp::KernelVaryingModel> model, size_t memo_entries);

  // One table per target, in order. Identical signatures within the trace
  // (e.g. the same layer repeated) are evaluated once, at the median of
  // their origin times, and the ratio applied to each.
  absl::StatusOr<std::vector<VaryingPassTable>> PredictTrace(
      const v1::Trace& trace, const v1::DeviceSpec& origin,
      const std::vector<const v1::DeviceSpec*>& targets) const;

  const mlp::KernelVaryingModel& model() const { return *model_; }
  // Model evaluations answered from the memo / computed, since start.
  int64_t memo_hits() const;
  int64_t memo_misses() const;

 private:
  std::shared_ptr<const mlp::KernelVaryingModel> model_;
  const size_t memo_entries_;
  mutable absl::Mutex mu_;
  mutable absl::flat_hash_map<std::string, double> memo_ ABSL_GUARDED_BY(mu_);
  mutable int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace habitat
