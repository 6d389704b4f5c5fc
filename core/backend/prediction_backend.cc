#include "core/backend/prediction_backend.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "core/backend/request_budget.h"
#include "core/predict/fsdp_prediction.h"
#include "core/trace/trace_id.h"
#include "core/trace/trace_validation.h"

namespace habitat {
namespace {

StopCondition StopFor(const RequestContext& context) {
  return StopCondition(context.deadline, context.deadline_source, context.cancelled);
}

// The catalog that prices requests naming none; "" for none.
absl::StatusOr<std::string> DefaultCatalog(const std::string& configured,
                                           const CatalogSet& catalogs) {
  if (configured == kNoCatalog) return std::string();
  if (configured.empty()) {
    return catalogs.Get(kPreferredDefaultCatalog).ok() ? std::string(kPreferredDefaultCatalog)
                                                       : std::string();
  }
  absl::StatusOr<const v1::PriceCatalog*> catalog = catalogs.Get(configured);
  if (!catalog.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the default catalog: ", catalog.status().message()));
  }
  return configured;
}

}  // namespace

bool IsValidTenantName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] == '.') return false;
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::unique_ptr<PredictionBackend>> PredictionBackend::Create(
    const BackendOptions& options, std::unique_ptr<TraceStore> store) {
  if (store == nullptr) return absl::InvalidArgumentError("the backend needs a trace store");
  HABITAT_ASSIGN_OR_RETURN(DeviceDatabase devices,
                           DeviceDatabase::LoadFromFile(options.data_dir + "/devices.textproto"));
  HABITAT_ASSIGN_OR_RETURN(CatalogSet catalogs,
                           CatalogSet::LoadFromDirectory(options.data_dir + "/catalogs", devices));
  HABITAT_ASSIGN_OR_RETURN(std::string default_catalog,
                           DefaultCatalog(options.default_catalog, catalogs));
  std::shared_ptr<const VaryingPredictor> varying;
  if (!options.models_dir.empty()) {
    const std::string model_dir = options.models_dir + "/kernel_varying";
    auto loaded = VaryingPredictor::Load(model_dir, options.model_memo_entries);
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(),
                          absl::StrCat("loading the kernel-varying predictor from ", model_dir,
                                       " (set --models_dir, or 'none' to run without it): ",
                                       loaded.status().message()));
    }
    varying = std::move(*loaded);
  }
  auto snapshot = std::make_shared<CatalogSnapshot>(
      CatalogSnapshot{std::move(catalogs), std::move(default_catalog), 0});
  std::unique_ptr<PredictionBackend> backend(new PredictionBackend(
      options, std::move(devices), std::move(snapshot), std::move(store), std::move(varying)));
  backend->stored_traces();  // the first count, for the metric
  return backend;
}

PredictionBackend::PredictionBackend(const BackendOptions& options, DeviceDatabase devices,
                                     std::shared_ptr<const CatalogSnapshot> catalogs,
                                     std::unique_ptr<TraceStore> store,
                                     std::shared_ptr<const VaryingPredictor> varying)
    : limits_(options.trace_limits),
      max_predict_work_(options.max_predict_work),
      max_response_bytes_(options.max_response_bytes),
      max_request_memory_bytes_(options.max_request_memory_bytes),
      data_dir_(options.data_dir),
      configured_default_catalog_(options.default_catalog),
      devices_(std::move(devices)),
      catalogs_(std::move(catalogs)),
      store_(std::move(store)),
      cache_(std::make_shared<PredictionCache>(options.cache_entries,
                                               options.cache_bytes - options.cache_bytes / 4)),
      answers_(options.cache_entries, options.cache_bytes / 4),
      varying_(std::move(varying)),
      engine_(&devices_, cache_, varying_) {}

std::shared_ptr<const PredictionBackend::CatalogSnapshot> PredictionBackend::Catalogs() const {
  absl::MutexLock lock(&catalogs_mutex_);
  return catalogs_;
}

absl::Status PredictionBackend::ReloadCatalogs() {
  HABITAT_ASSIGN_OR_RETURN(CatalogSet catalogs,
                           CatalogSet::LoadFromDirectory(data_dir_ + "/catalogs", devices_));
  HABITAT_ASSIGN_OR_RETURN(std::string default_catalog,
                           DefaultCatalog(configured_default_catalog_, catalogs));
  {
    absl::MutexLock lock(&catalogs_mutex_);
    catalogs_ = std::make_shared<CatalogSnapshot>(CatalogSnapshot{
        std::move(catalogs), std::move(default_catalog), catalogs_->generation + 1});
  }
  // The new generation already misses every old answer; this frees them.
  answers_.Clear();
  return absl::OkStatus();
}

size_t PredictionBackend::stored_traces() {
  auto count = store_->Count();
  if (count.ok()) last_count_ = *count;
  return last_count_;
}

namespace {

// PredictRequest.parallel and catalog_instances into `query`, checked.
absl::Status ReadParallel(const v1::PredictRequest& request, PredictionQuery* query) {
  if (request.parallel_size() > kMaxParallelConfigs) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxParallelConfigs,
                                                   " parallel configurations, got ",
                                                   request.parallel_size()));
  }
  for (int i = 0; i < request.parallel_size(); ++i) {
    const v1::ParallelConfig& c = request.parallel(i);
    if (c.gpus_per_node() < 1 || c.gpus_per_node() > kMaxGpusPerNode) {
      return absl::InvalidArgumentError(
          absl::StrCat("parallel[", i, "].gpus_per_node must be in [1, ", kMaxGpusPerNode,
                       "], got ", c.gpus_per_node()));
    }
    if (c.nodes() > kMaxNodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("parallel[", i, "].nodes must be at most ", kMaxNodes, ", got ", c.nodes()));
    }
    if (c.bucket_cap_bytes() < 0 || c.bucket_cap_bytes() > kMaxBucketCapBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("parallel[", i, "].bucket_cap_bytes must be in [0, ", kMaxBucketCapBytes,
                       "], got ", c.bucket_cap_bytes()));
    }
    if (c.fsdp_units() > kMaxFsdpUnits) {
      return absl::InvalidArgumentError(absl::StrCat("parallel[", i,
                                                     "].fsdp_units must be at most ", kMaxFsdpUnits,
                                                     ", got ", c.fsdp_units()));
    }
    if (c.fsdp_wrap().size() > kMaxFsdpWrapChars) {
      return absl::InvalidArgumentError(absl::StrCat("parallel[", i, "].fsdp_wrap must be at most ",
                                                     kMaxFsdpWrapChars, " characters"));
    }
    if (!c.fsdp_wrap().empty() && c.fsdp_units() > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parallel[", i, "]: fsdp_wrap and fsdp_units both cut the units; give one of them"));
    }
    if (absl::Status modelled = CheckModelledParallelism(c); !modelled.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("parallel[", i, "]: ", modelled.message()));
    }
  }
  query->parallel.assign(request.parallel().begin(), request.parallel().end());
  query->catalog_instances = request.catalog_instances();
  return absl::OkStatus();
}

// What request_budget.h bounds of a Predict of `trace` for `query`.
PredictShape ShapeOf(const PredictionQuery& query, const v1::Trace& trace,
                     const DeviceDatabase& devices) {
  PredictShape shape;
  shape.gpus = static_cast<int64_t>(query.devices.size());
  if (shape.gpus == 0) {
    for (const auto& spec : devices.devices()) shape.gpus += spec.test_only() ? 0 : 1;
  }
  shape.include_breakdown = query.include_breakdown;
  shape.copies_trace =
      query.fit.has_value() || (query.batch_size != 0 && query.batch_size != trace.batch_size());
  return shape;
}

}  // namespace

absl::StatusOr<v1::PredictResponse> PredictionBackend::Predict(const v1::PredictRequest& request,
                                                               const RequestContext& context,
                                                               PredictionStats* stats) {
  return PredictWith(request, context, *Catalogs(), stats);
}

std::string PredictionBackend::AnswerKey(const v1::PredictRequest& request,
                                         const RequestContext& context,
                                         const CatalogSnapshot& catalogs) const {
  if (!answers_.enabled() || request.trace_source_case() != v1::PredictRequest::kTraceId) {
    return std::string();
  }
  // The trace id names the trace's content and the request's own bytes the
  // rest of the question (PredictRequest has no map fields, so equal
  // requests serialise alike; requests that only differ in encoding merely
  // miss). The tenant keeps namespaces apart ('\n' is in no tenant name).
  std::string key = absl::StrCat(context.tenant, "\n", catalogs.generation, "\n");
  if (!request.AppendToString(&key)) return std::string();
  return key;
}

CachedAnswer PredictionBackend::LookUpAnswer(const v1::PredictRequest& request,
                                             const RequestContext& context) {
  if (!store_->AnswersLocally()) return {};
  return FromCache(AnswerKey(request, context, *Catalogs()), request, context);
}

CachedAnswer PredictionBackend::FromCache(const std::string& key, const v1::PredictRequest& request,
                                          const RequestContext& context) {
  if (key.empty()) return {};
  CachedAnswer answer = answers_.Lookup(key);
  if (answer.bytes == nullptr) return {};
  // Retention may have deleted the trace since (the parsed trace stays in
  // the store's memory; Get checks it is still stored): then Predict gives
  // the NOT_FOUND.
  if (!store_->Get(context.tenant, request.trace_id()).ok()) return {};
  return answer;
}

absl::StatusOr<CachedAnswer> PredictionBackend::PredictSerialized(const v1::PredictRequest& request,
                                                                  const RequestContext& context,
                                                                  PredictionStats* stats) {
  const std::shared_ptr<const CatalogSnapshot> catalogs = Catalogs();
  const std::string key = AnswerKey(request, context, *catalogs);
  if (CachedAnswer answer = FromCache(key, request, context); answer.bytes != nullptr) {
    if (stats != nullptr) stats->cache_hits += answer.predictions;
    return answer;
  }
  HABITAT_ASSIGN_OR_RETURN(v1::PredictResponse response,
                           PredictWith(request, context, *catalogs, stats));
  auto bytes = std::make_shared<std::string>();
  if (!response.SerializeToString(bytes.get())) {
    return absl::InternalError("cannot serialise the response");
  }
  CachedAnswer answer{std::move(bytes), response.predictions_size()};
  if (!key.empty()) answers_.Insert(key, answer);
  return answer;
}

absl::StatusOr<v1::PredictResponse> PredictionBackend::PredictWith(
    const v1::PredictRequest& request, const RequestContext& context,
    const CatalogSnapshot& catalogs, PredictionStats* stats) {
  const StopCondition stop = StopFor(context);
  HABITAT_RETURN_IF_ERROR(stop.Check("before reading the trace"));
  std::shared_ptr<const v1::Trace> trace;
  std::string trace_id;
  switch (request.trace_source_case()) {
    case v1::PredictRequest::kTrace:
      // Aliasing pointer: no copy of a possibly large inline trace.
      trace = std::shared_ptr<const v1::Trace>(std::shared_ptr<void>(), &request.trace());
      break;
    case v1::PredictRequest::kTraceId: {
      HABITAT_RETURN_IF_ERROR(CheckTraceId(request.trace_id()));
      // Another tenant's trace is not in this tenant's namespace, so the
      // answer is the same NOT_FOUND as for an id nobody uploaded.
      HABITAT_ASSIGN_OR_RETURN(trace, store_->Get(context.tenant, request.trace_id()));
      trace_id = request.trace_id();
      break;
    }
    default:
      return absl::InvalidArgumentError(
          "the request needs a trace: set `trace` or `trace_id` (from UploadTrace)");
  }

  // Stored traces were validated by UploadTrace; inline ones are checked
  // here against the configured limits (the engine would use the defaults).
  if (trace_id.empty()) HABITAT_RETURN_IF_ERROR(ValidateTrace(*trace, limits_));
  PredictionQuery query;
  query.devices.assign(request.devices().begin(), request.devices().end());
  query.include_breakdown = request.include_breakdown();
  const double host_speed = request.target_host_speed();
  if (host_speed != 0.0 &&
      !(host_speed >= kMinTargetHostSpeed && host_speed <= kMaxTargetHostSpeed)) {  // NaN too
    return absl::InvalidArgumentError(absl::StrCat(
        "target_host_speed must be within [", kMinTargetHostSpeed, ", ", kMaxTargetHostSpeed,
        "] (the target host's speed relative to the origin's; 0 or unset means 1), got ",
        host_speed));
  }
  query.host_speed = host_speed == 0.0 ? 1.0 : host_speed;
  if (request.batch_size() > kMaxBatchSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size ", request.batch_size(), " is above the largest batch size, ", kMaxBatchSize));
  }
  query.batch_size = request.batch_size();
  if (request.has_fit()) {
    if (request.batch_size() != 0) {
      return absl::InvalidArgumentError(
          "a fit chooses each GPU's batch size: leave batch_size unset (0) with fit");
    }
    if (request.fit().batch_step() > kMaxBatchSize) {
      return absl::InvalidArgumentError(absl::StrCat("fit.batch_step ", request.fit().batch_step(),
                                                     " is above the largest batch size, ",
                                                     kMaxBatchSize));
    }
    query.fit = request.fit();
  }
  HABITAT_RETURN_IF_ERROR(ReadParallel(request, &query));
  query.trace_already_validated = true;
  query.cache_namespace = context.tenant;
  if (!v1::PriceKind_IsValid(request.price_kind())) {
    return absl::InvalidArgumentError(
        absl::StrCat("price_kind ", request.price_kind(), " is not a known PriceKind"));
  }
  // The one place where a request naming no price kind gets on-demand.
  query.price_kind = request.price_kind() == v1::PRICE_KIND_UNSPECIFIED ? v1::PRICE_KIND_ON_DEMAND
                                                                        : request.price_kind();
  HABITAT_ASSIGN_OR_RETURN(query.catalog, CatalogFor(request, catalogs));
  if (query.catalog_instances && query.catalog == nullptr) {
    return absl::InvalidArgumentError(
        "catalog_instances ranks a catalog's instance types: name a catalog (or leave the "
        "server's default on)");
  }
  HABITAT_RETURN_IF_ERROR(CheckPredictFits(*trace, ShapeOf(query, *trace, devices_),
                                           max_response_bytes_, max_request_memory_bytes_));
  HABITAT_RETURN_IF_ERROR(stop.Check("before predicting"));
  query.stop = &stop;
  query.max_work = max_predict_work_;
  return engine_.Predict(*trace, std::move(trace_id), query, stats);
}

absl::StatusOr<const v1::PriceCatalog*> PredictionBackend::CatalogFor(
    const v1::PredictRequest& request, const CatalogSnapshot& catalogs) const {
  switch (request.pricing_case()) {
    case v1::PredictRequest::kCatalog:
      if (request.catalog().empty() || absl::EqualsIgnoreCase(request.catalog(), kNoCatalog)) {
        return nullptr;
      }
      return catalogs.catalogs.Get(request.catalog());
    case v1::PredictRequest::kInlineCatalog:
      HABITAT_RETURN_IF_ERROR(ValidateCatalog(request.inline_catalog(), devices_));
      return &request.inline_catalog();
    case v1::PredictRequest::PRICING_NOT_SET:
      break;
  }
  if (catalogs.default_catalog.empty()) return nullptr;
  return catalogs.catalogs.Get(catalogs.default_catalog);
}

absl::StatusOr<v1::UploadTraceResponse> PredictionBackend::UploadTrace(
    const v1::UploadTraceRequest& request, const RequestContext& context) {
  if (!request.has_trace()) {
    return absl::InvalidArgumentError("UploadTrace needs `trace`");
  }
  const StopCondition stop = StopFor(context);
  HABITAT_RETURN_IF_ERROR(stop.Check("before validating the trace"));
  HABITAT_RETURN_IF_ERROR(ValidateTrace(request.trace(), limits_));
  // Reject traces we could never predict from before storing them.
  HABITAT_RETURN_IF_ERROR(engine_.ResolveOrigin(request.trace()).status());
  // Checked before the write only: once stored, the id is acknowledged.
  HABITAT_RETURN_IF_ERROR(stop.Check("before storing the trace"));
  HABITAT_ASSIGN_OR_RETURN(StoredTrace stored, store_->Put(context.tenant, request.trace()));
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
  const std::shared_ptr<const CatalogSnapshot> catalogs = Catalogs();
  for (const auto& catalog : catalogs->catalogs.catalogs()) *response.add_catalogs() = catalog;
  response.set_default_catalog(catalogs->default_catalog);
  return response;
}

}  // namespace habitat
