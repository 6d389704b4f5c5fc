// One GPU's prediction of a trace: every operation predicted on the target
// (operation_scaling.h), the GPU time and its expected error, the wall time
// from replaying the host timeline, and the device-level warnings
// (warning_tally.h). No prices or ranks (price_and_rank.h).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/predict/host_replay.h"
#include "core/predict/operation_scaling.h"
#include "core/predict/stop_condition.h"
#include "core/predict/varying_predictor.h"
#include "habitat/v1/device.pb.h"
#include "habitat/v1/prediction_service.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// Predicts one target GPU with the full per-operation breakdown; no prices
// or ranks. `host_scale` is the trace's HostScaleFor (computed when absent);
// it depends only on the trace, so callers predicting many GPUs pass it in.
// `varying`: the kernel-varying predictions for this target
// (VaryingPredictor::PredictTrace); null carries those ops over unscaled.
// `stop` (may be null) is checked every kOperationsPerStopCheck operations.
// Exposed for tests and the evaluation tools.
absl::StatusOr<habitat::v1::DevicePrediction> PredictOnDevice(
    const habitat::v1::Trace& trace, const habitat::v1::DeviceSpec& origin,
    const habitat::v1::DeviceSpec& target, std::optional<double> host_scale = std::nullopt,
    const VaryingPassTable* varying = nullptr, const StopCondition* stop = nullptr);

// What predicting a trace on any GPU reads from it, worked out once.
struct TraceFacts {
  std::vector<OperationFacts> operations;  // one per operation
  std::shared_ptr<const ReplayPlan> replay;
};

TraceFacts FactsOf(const habitat::v1::Trace& trace);

// PredictOnDevice with `facts` = FactsOf(trace), for callers predicting
// the same trace on many GPUs.
absl::StatusOr<habitat::v1::DevicePrediction> PredictOnDeviceWith(
    const habitat::v1::Trace& trace, const TraceFacts& facts, const habitat::v1::DeviceSpec& origin,
    const habitat::v1::DeviceSpec& target, std::optional<double> host_scale,
    const VaryingPassTable* varying, const StopCondition* stop);

// How fast the host ran relative to the profiled timeline (see
// CalibrateHostScale); nullopt when the trace has no host timeline.
std::optional<double> HostScaleFor(const habitat::v1::Trace& trace);
// The same, giving up with `stop`'s status when it says to (calibration
// replays the iteration 25 times).
absl::StatusOr<std::optional<double>> HostScaleFor(const habitat::v1::Trace& trace,
                                                   const StopCondition* stop);

}  // namespace habitat
