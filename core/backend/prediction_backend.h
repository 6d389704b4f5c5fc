// The service's logic on request/response messages, with no transport: the
// gRPC server and the CLI's embedded mode both call this, so they answer
// the same requests the same way.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/backend/answer_cache.h"
#include "core/devices/device_database.h"
#include "core/predict/prediction_engine.h"
#include "core/pricing/price_catalog.h"
#include "core/store/trace_store.h"
#include "core/trace/trace_validation.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

// PredictRequest.target_host_speed, when set (not 0): the target host's
// speed relative to the origin's. Outside this range it describes no real
// machine (a host 1e-12 times as fast replayed to 80 years).
inline constexpr double kMinTargetHostSpeed = 0.01;
inline constexpr double kMaxTargetHostSpeed = 100.0;

// Bounds of PredictRequest.parallel: configurations per request, GPUs per
// node, nodes, the bucket cap (DDP's bucket_cap_mb in bytes) and FSDP's
// units (more than any model has layers).
inline constexpr int kMaxParallelConfigs = 16;
inline constexpr uint32_t kMaxGpusPerNode = 64;
inline constexpr uint32_t kMaxNodes = 4096;
inline constexpr int64_t kMaxBucketCapBytes = int64_t{1} << 40;
inline constexpr uint32_t kMaxFsdpUnits = 4096;
// A module class name (ParallelConfig.fsdp_wrap): Python identifiers are
// far shorter.
inline constexpr size_t kMaxFsdpWrapChars = 256;

// The catalog name that asks for no prices, in a request or as the
// default.
inline constexpr char kNoCatalog[] = "none";
// The default catalog when the deployment names none and has it.
inline constexpr char kPreferredDefaultCatalog[] = "aws";

struct BackendOptions {
  // Holds devices.textproto and catalogs/*.textproto.
  std::string data_dir;
  // The catalog that prices a request naming none (PredictRequest leaves
  // `pricing` unset). Empty: "aws" when the data directory has it, else no
  // prices; kNoCatalog: no prices unless asked. Any other name must be a
  // loaded catalog.
  std::string default_catalog;
  // Bounds of the caches: entries and bytes. The per-(trace, GPU)
  // predictions (PredictionCache) take 3/4 of the bytes, the serialised
  // answers (AnswerCache) 1/4; either bound 0 turns both off.
  size_t cache_entries = 4096;
  size_t cache_bytes = kDefaultPredictionCacheBytes;
  // Holds kernel_varying/ (model.pt, manifest.json: models/train.py and
  // models/export.py). Empty: no kernel-varying predictor; those operations
  // are then carried over unscaled, with a warning.
  std::string models_dir;
  // Bound on memoised model outputs (per op signature and GPU pair).
  size_t model_memo_entries = 1 << 16;
  // Applied to every uploaded or inline trace.
  TraceLimits trace_limits;
  // Most work one Predict may start (PredictionWork: trace entries times
  // GPUs not in the cache); more is RESOURCE_EXHAUSTED before any is done.
  // 0: no limit.
  int64_t max_predict_work = kDefaultMaxPredictWork;
  // Largest answer the transport sends; a breakdown that cannot fit is
  // RESOURCE_EXHAUSTED before it is computed. 0: no limit.
  int64_t max_response_bytes = 0;
  // Most memory one Predict may take beyond its parsed trace
  // (request_budget.h: a batch-scaled copy, the breakdown); more is
  // RESOURCE_EXHAUSTED before any work. 0: no limit.
  int64_t max_request_memory_bytes = 0;
};

// Who is asking and until when. The server fills it from the authenticated
// token and the call's deadline; the CLI uses the default.
struct RequestContext {
  // "" is the anonymous tenant (authentication off). Each tenant sees only
  // the traces it uploaded.
  std::string tenant;
  // Work stops with DEADLINE_EXCEEDED once this passes: checked between
  // stages and, while predicting, between GPUs and batches of operations.
  absl::Time deadline = absl::InfiniteFuture();
  // Says where the deadline came from, for the error message, e.g. "the
  // client's deadline".
  std::string deadline_source = "the request deadline";
  // Work stops with CANCELLED once this returns true (the client went away,
  // the server's shutdown grace ran out); empty: never.
  std::function<bool()> cancelled;
};

// True for names usable as a tenant: 1-64 of [A-Za-z0-9._-], not starting
// with '.' (they become directory names in a directory trace store).
bool IsValidTenantName(const std::string& name);

class PredictionBackend {
 public:
  // Loads and validates the GPU spec database and price catalogs; any error
  // names the file and field so a bad deployment fails at start-up. Uploaded
  // traces go to `store`, which the caller chose: the core opens no
  // database, so that the CLI's in-process backend links none.
  static absl::StatusOr<std::unique_ptr<PredictionBackend>> Create(
      const BackendOptions& options, std::unique_ptr<TraceStore> store);

  absl::StatusOr<habitat::v1::PredictResponse> Predict(const habitat::v1::PredictRequest& request,
                                                       const RequestContext& context,
                                                       PredictionStats* stats = nullptr);
  absl::StatusOr<habitat::v1::UploadTraceResponse> UploadTrace(
      const habitat::v1::UploadTraceRequest& request, const RequestContext& context);
  // Predict's answer serialised, for a transport. A request by trace id is
  // answered from the answer cache when it was answered before (same
  // tenant, same request bytes, same catalogs) and its trace is still
  // stored; otherwise it is predicted, and the bytes are kept.
  absl::StatusOr<CachedAnswer> PredictSerialized(const habitat::v1::PredictRequest& request,
                                                 const RequestContext& context,
                                                 PredictionStats* stats = nullptr);
  // The cached answer of `request` alone: empty bytes unless
  // PredictSerialized would answer it from the cache and the store answers
  // locally (TraceStore::AnswersLocally). Cheap enough for gRPC's own
  // threads (no prediction, no serialisation, no database server).
  CachedAnswer LookUpAnswer(const habitat::v1::PredictRequest& request,
                            const RequestContext& context);
  // The anonymous tenant without a deadline.
  absl::StatusOr<habitat::v1::PredictResponse> Predict(const habitat::v1::PredictRequest& request,
                                                       PredictionStats* stats = nullptr) {
    return Predict(request, RequestContext(), stats);
  }
  absl::StatusOr<habitat::v1::UploadTraceResponse> UploadTrace(
      const habitat::v1::UploadTraceRequest& request) {
    return UploadTrace(request, RequestContext());
  }
  habitat::v1::ListDevicesResponse ListDevices(
      const habitat::v1::ListDevicesRequest& request) const;
  habitat::v1::ListCatalogsResponse ListCatalogs() const;
  // Reads the price catalogs again (the data directory's catalogs/) and
  // answers with them from now on; calls in flight finish with the old
  // ones. On error the old catalogs stay. Cached answers priced with the
  // old ones are never served again.
  absl::Status ReloadCatalogs();

  const DeviceDatabase& devices() const { return devices_; }
  // The catalog that prices requests naming none; "" for none.
  std::string default_catalog() const { return Catalogs()->default_catalog; }
  // The trace store, all tenants.
  TraceStore& store() { return *store_; }
  // Traces stored, over all tenants (the last count read while the store
  // does not answer).
  size_t stored_traces();
  const PredictionCache& cache() const { return *cache_; }
  const AnswerCache& answers() const { return answers_; }
  // Null when the backend runs without the kernel-varying predictor.
  const VaryingPredictor* varying_predictor() const { return varying_.get(); }

 private:
  // The price catalogs as loaded at one time. A Predict holds the snapshot
  // it started with; a reload swaps in a new one with the next generation.
  struct CatalogSnapshot {
    CatalogSet catalogs;
    // Prices requests that name no catalog; "" for none.
    std::string default_catalog;
    // Part of every answer key: answers priced with older catalogs miss.
    uint64_t generation = 0;
  };

  PredictionBackend(const BackendOptions& options, DeviceDatabase devices,
                    std::shared_ptr<const CatalogSnapshot> catalogs,
                    std::unique_ptr<TraceStore> store,
                    std::shared_ptr<const VaryingPredictor> varying);

  std::shared_ptr<const CatalogSnapshot> Catalogs() const;
  // The catalog of the request, else the default; null: no prices.
  absl::StatusOr<const habitat::v1::PriceCatalog*> CatalogFor(
      const habitat::v1::PredictRequest& request, const CatalogSnapshot& catalogs) const;
  // Predict with the catalogs of `catalogs`.
  absl::StatusOr<habitat::v1::PredictResponse> PredictWith(
      const habitat::v1::PredictRequest& request, const RequestContext& context,
      const CatalogSnapshot& catalogs, PredictionStats* stats);
  // The answer cache's key of `request`, "" when its answer is not cached
  // (an inline trace: hashing it costs about what answering does).
  std::string AnswerKey(const habitat::v1::PredictRequest& request, const RequestContext& context,
                        const CatalogSnapshot& catalogs) const;
  // The answer cached under `key` ("": none) while its trace is stored.
  CachedAnswer FromCache(const std::string& key, const habitat::v1::PredictRequest& request,
                         const RequestContext& context);

  const TraceLimits limits_;
  const int64_t max_predict_work_;
  const int64_t max_response_bytes_;
  const int64_t max_request_memory_bytes_;
  const std::string data_dir_;
  // BackendOptions::default_catalog, resolved again on every reload.
  const std::string configured_default_catalog_;
  DeviceDatabase devices_;
  mutable absl::Mutex catalogs_mutex_;
  std::shared_ptr<const CatalogSnapshot> catalogs_ ABSL_GUARDED_BY(catalogs_mutex_);
  std::unique_ptr<TraceStore> store_;
  std::atomic<size_t> last_count_{0};
  std::shared_ptr<PredictionCache> cache_;
  // Keyed by tenant, catalog generation and request bytes; the devices and
  // the models are the backend's for its lifetime, so they need no key.
  AnswerCache answers_;
  std::shared_ptr<const VaryingPredictor> varying_;
  PredictionEngine engine_;
};

}  // namespace habitat
