// The prediction core: scales a measured trace to other GPUs and prices the
// result. Plain C++ over the habitat.v1 messages, no gRPC, so the CLI runs it
// in-process and the server wraps it. PredictionEngine orchestrates a
// Predict: the GPUs and batches it asks for, the cache, memory, data-parallel
// steps and the response's own warnings; one GPU's prediction is
// device_prediction.h's (PredictOnDevice, HostScaleFor), prices and ranks
// are price_and_rank.h's (PriceAndRank); this header includes both.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/devices/device_database.h"
#include "core/predict/device_prediction.h"
#include "core/predict/memory_prediction.h"
#include "core/predict/prediction_cache.h"
#include "core/predict/price_and_rank.h"
#include "core/predict/stop_condition.h"
#include "core/predict/varying_predictor.h"
#include "core/predict/warning_tally.h"
#include "core/pricing/price_catalog.h"
#include "habitat/v1/prediction_service.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

struct PredictionQuery {
  // Device ids; empty means every device that is not test-only.
  std::vector<std::string> devices;
  // Null: no prices in the response.
  const habitat::v1::PriceCatalog* catalog = nullptr;
  // On-demand or spot: the caller resolves a request naming neither (the
  // backend). UNSPECIFIED finds no price.
  habitat::v1::PriceKind price_kind = habitat::v1::PRICE_KIND_UNSPECIFIED;
  bool include_breakdown = false;
  // True for traces that were validated when stored (UploadTrace), so a
  // repeated Predict by id does not re-check them.
  bool trace_already_validated = false;
  // The batch size to predict at (PredictRequest field; ScaleTraceToBatch);
  // 0: the trace's.
  uint32_t batch_size = 0;
  // Set: each GPU at the largest batch that fits it (PredictRequest.fit;
  // core/predict/memory_prediction.h); batch_size is then 0.
  std::optional<habitat::v1::FitRequest> fit;
  // Data-parallel configurations to predict on every GPU
  // (PredictRequest.parallel), and whether to add one node of each catalog
  // instance size (catalog_instances); PredictionBackend checks their ranges.
  std::vector<habitat::v1::ParallelConfig> parallel;
  bool catalog_instances = false;
  // Set by the engine (not a request field): the trace being predicted is
  // the single-GPU step of one rank of an FSDP step on this many GPUs
  // (core/trace/fsdp_rank.h); 0 for a single-GPU trace.
  int fsdp_rank_of = 0;
  // Set with it: the host scale calibrated on the rank's own trace (its
  // measured step), which the single-GPU step no longer has.
  std::optional<std::optional<double>> fsdp_rank_host_scale;
  // And the single-GPU memory the rank's amounts to, where its trace has
  // memory (SingleGpuMemoryOfFsdpRank).
  std::optional<MemoryModel> fsdp_rank_memory;
  // Target host speed relative to the origin's (PredictRequest field),
  // positive; PredictionBackend is the one that checks requests' values.
  double host_speed = 1.0;
  // Whose memoised predictions the call may use and add to: the backend
  // passes the tenant, so a fast answer cannot tell one tenant which traces
  // another predicted (an inline Predict of bytes another tenant had
  // predicted answered in 19.6 ms against 45.1 ms). Never holds '\n'.
  std::string cache_namespace;
  // Checked between GPUs and batches of operations; null: never stops.
  const StopCondition* stop = nullptr;
  // Most work the call may start: PredictionWorkPerDevice times the GPUs
  // not in the cache. More is RESOURCE_EXHAUSTED before any work. 0: none.
  int64_t max_work = 0;
};

// What predicting `trace` on one GPU costs, in trace entries: operations,
// kernels, memory activities and host events (each costs about the same to
// scale and replay).
int64_t PredictionWorkPerDevice(const habitat::v1::Trace& trace);

// What a Predict costs once whatever the GPUs, in PredictionWorkPerDevice
// units: the 25 replays that calibrate the host timeline, hashing and
// validating an inline trace. Measured at about 6 GPUs' worth
// (core/backend/work_estimate_test.cc); uncharged, a call on one GPU cost
// 7.6 times as much CPU per unit as one on 21.
inline constexpr int64_t kPerCallWorkInDevices = 6;

// The servers' default for PredictionQuery::max_work: work that would not
// finish within the default per-request cap of 60 s anyway (one unit took
// about 1.3 us on the 2-core reference machine: an 80,000-operation trace,
// 4.9 million units over 21 GPUs, in 6.3 s). A GPT-style trace (~10^5
// entries) on all 21 GPUs is about 2 million.
inline constexpr int64_t kDefaultMaxPredictWork = 40'000'000;

// Counts of what a Predict did, for metrics.
struct PredictionStats {
  struct DeviceOperations {
    // Points into the engine's DeviceDatabase, which outlives the stats.
    absl::string_view device_id;
    // Index = PredictionMethod value.
    int64_t by_method[habitat::v1::PredictionMethod_ARRAYSIZE] = {};
  };
  int cache_hits = 0;
  int cache_misses = 0;
  // Operation predictions made, by method (index = PredictionMethod value).
  int64_t operations_by_method[habitat::v1::PredictionMethod_ARRAYSIZE] = {};
  // The same per target device, one entry per device predicted afresh
  // (cache hits add none, so warm calls allocate nothing here).
  std::vector<DeviceOperations> operations_by_device;
};

class PredictionEngine {
 public:
  // `devices` must outlive the engine. `cache` may be null (no memoisation).
  // `varying` may be null: kernel-varying ops are then carried over
  // unscaled, with a warning.
  PredictionEngine(const DeviceDatabase* devices, std::shared_ptr<PredictionCache> cache,
                   std::shared_ptr<const VaryingPredictor> varying = nullptr);

  // Validates `trace`, resolves its origin GPU and predicts every requested
  // device. `trace_id` keys the memo cache (ComputeTraceId when empty). A
  // trace of one FSDP rank (core/trace/fsdp_rank.h) is predicted as the
  // single-GPU step its work amounts to, without memory.
  // Errors: INVALID_ARGUMENT for a malformed trace or query, NOT_FOUND for
  // an unknown origin or target GPU.
  absl::StatusOr<habitat::v1::PredictResponse> Predict(const habitat::v1::Trace& trace,
                                                       std::string trace_id,
                                                       const PredictionQuery& query,
                                                       PredictionStats* stats = nullptr) const;

  // The spec of the GPU the trace was measured on.
  absl::StatusOr<const habitat::v1::DeviceSpec*> ResolveOrigin(
      const habitat::v1::Trace& trace) const;

 private:
  // The GPUs a query names (every listed one when it names none);
  // INVALID_ARGUMENT for a repeated id, NOT_FOUND for an unknown one.
  absl::StatusOr<std::vector<const habitat::v1::DeviceSpec*>> ResolveTargets(
      const std::vector<std::string>& ids) const;
  // HostScaleFor(traced) divided by the host speed, once computed: it
  // depends on the traced trace only, not on the batch or the GPU.
  using HostScaleMemo = std::optional<std::optional<double>>;
  // Predict for a trace of one rank of an FSDP step on `world` GPUs:
  // FAILED_PRECONDITION for a fit (it needs the single-GPU memory).
  absl::StatusOr<habitat::v1::PredictResponse> PredictFsdpRank(const habitat::v1::Trace& traced,
                                                               int world, std::string trace_id,
                                                               const PredictionQuery& query,
                                                               PredictionStats* stats) const;
  // Predictions of `targets`, in order, from the trace scaled to `batch`,
  // with the batch scaling's warnings. Work started is taken from
  // `work_left` (RESOURCE_EXHAUSTED when it would go below 0).
  struct BatchPredictions {
    std::vector<habitat::v1::DevicePrediction> predictions;
    std::vector<KindedWarning> warnings;  // without GPUs: all of `targets`
  };
  absl::StatusOr<BatchPredictions> PredictAtBatch(
      const habitat::v1::Trace& traced, const std::string& trace_id,
      const habitat::v1::DeviceSpec& origin,
      const std::vector<const habitat::v1::DeviceSpec*>& targets, uint32_t batch,
      const PredictionQuery& query, HostScaleMemo* host_scale, int64_t* work_left,
      PredictionStats* stats) const;

  const DeviceDatabase* devices_;
  std::shared_ptr<PredictionCache> cache_;
  std::shared_ptr<const VaryingPredictor> varying_;
};

}  // namespace habitat
