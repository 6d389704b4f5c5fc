#include "core/predict/prediction_engine.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "core/predict/batch_scaling.h"
#include "core/predict/ddp_prediction.h"
#include "core/predict/fsdp_prediction.h"
#include "core/predict/host_replay.h"
#include "core/predict/memory_prediction.h"
#include "core/predict/varying_predictor.h"
#include "core/predict/warning_tally.h"
#include "core/trace/fsdp_modules.h"
#include "core/trace/fsdp_rank.h"
#include "core/trace/op_classification.h"
#include "core/trace/trace_id.h"
#include "core/trace/trace_validation.h"

namespace habitat {
namespace {

using habitat::v1::DevicePrediction;
using habitat::v1::DeviceSpec;
using habitat::v1::OperationPrediction;

// Whether a cache entry can answer: one without the breakdown cannot
// answer a call that asks for it.
bool Answers(const CachedPrediction& entry, bool include_breakdown) {
  return include_breakdown ? entry.full != nullptr : entry.summary != nullptr;
}

// The breakdown is kept only when it was asked for: it is most of an
// entry's size and most calls do not read it.
CachedPrediction ForTheCache(DevicePrediction fresh, bool include_breakdown) {
  // Swapped out, not cleared: a cleared repeated field keeps its elements
  // allocated for reuse, so a "summary" would still hold the breakdown.
  google::protobuf::RepeatedPtrField<OperationPrediction> operations;
  operations.Swap(fresh.mutable_operations());
  CachedPrediction entry;
  if (!include_breakdown) {
    entry.summary = std::make_shared<const DevicePrediction>(std::move(fresh));
    return entry;
  }
  entry.summary = std::make_shared<const DevicePrediction>(fresh);
  fresh.mutable_operations()->Swap(&operations);
  entry.full = std::make_shared<const DevicePrediction>(std::move(fresh));
  return entry;
}

}  // namespace

int64_t PredictionWorkPerDevice(const v1::Trace& trace) {
  int64_t work = int64_t{trace.operations_size()} + trace.unattributed_kernels_size() +
                 trace.host_events_size();
  for (const auto& op : trace.operations()) {
    work += op.forward().kernels_size() + op.forward().memory_size() +
            op.backward().kernels_size() + op.backward().memory_size();
  }
  return work;
}

PredictionEngine::PredictionEngine(const DeviceDatabase* devices,
                                   std::shared_ptr<PredictionCache> cache,
                                   std::shared_ptr<const VaryingPredictor> varying)
    : devices_(devices), cache_(std::move(cache)), varying_(std::move(varying)) {}

absl::StatusOr<const DeviceSpec*> PredictionEngine::ResolveOrigin(const v1::Trace& trace) const {
  if (!trace.origin().device_id().empty()) {
    const DeviceSpec* spec = devices_->Find(trace.origin().device_id());
    if (spec == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("origin.device_id '", trace.origin().device_id(),
                       "' is not in the GPU spec database; see ListDevices / `habitat devices`"));
    }
    return spec;
  }
  const DeviceSpec* spec = devices_->FindByDriverName(trace.origin().name());
  if (spec == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("origin GPU '", trace.origin().name(),
                     "' (origin.name) is not in the GPU spec database; set origin.device_id to "
                     "one of the ids from ListDevices / `habitat devices`"));
  }
  return spec;
}

absl::StatusOr<std::vector<const DeviceSpec*>> PredictionEngine::ResolveTargets(
    const std::vector<std::string>& ids) const {
  std::vector<const DeviceSpec*> targets;
  if (ids.empty()) {
    for (const auto& spec : devices_->devices()) {
      if (!spec.test_only()) targets.push_back(&spec);
    }
    return targets;
  }
  // By the id each resolves to: "t4" and "Tesla T4" are T4.
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 0; i < ids.size(); ++i) {
    HABITAT_ASSIGN_OR_RETURN(const DeviceSpec* spec, devices_->Get(ids[i]));
    if (!seen.insert(spec->id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("devices[", i, "] '", ids[i], "' is listed more than once"));
    }
    targets.push_back(spec);
  }
  return targets;
}

namespace {

// One Predict's targets grouped by the batch each is predicted at: the
// request's (or the trace's) for all of them, or with a fit the largest
// batch that fits each GPU (the trace's where none does: it is reported not
// to fit).
struct BatchGroup {
  uint32_t batch = 0;
  std::vector<size_t> targets;  // indices into the resolved targets
};

// The request's first configuration when it is fully sharded and the
// request asks for a fit: the batch then fits each of its GPUs sharded.
const v1::ParallelConfig* ShardedFit(const PredictionQuery& query) {
  if (!query.fit.has_value() || query.parallel.empty()) return nullptr;
  const v1::ParallelConfig& first = query.parallel.front();
  return first.kind() == v1::ParallelConfig::KIND_FULLY_SHARDED ? &first : nullptr;
}

// Each target's largest fitting batch (on the fit's grid, else powers of
// two), computed once for the grouping and the memory prediction; 0s
// without a memory model.
struct FittingBatches {
  std::vector<uint32_t> one_gpu;  // LargestFittingBatch: the whole model on one GPU
  // What a fit predicts each target at: one_gpu's, or with a sharded fit
  // the largest per-GPU batch that fits its GPUs with FSDP.
  std::vector<uint32_t> for_fit;
};
FittingBatches LargestFittingBatches(const v1::Trace& trace,
                                     const std::optional<MemoryModel>& memory,
                                     const PredictionQuery& query,
                                     const std::vector<const DeviceSpec*>& targets) {
  FittingBatches out{std::vector<uint32_t>(targets.size(), 0), {}};
  out.for_fit = out.one_gpu;
  if (!memory.has_value()) return out;
  const uint32_t step = query.fit.has_value() ? query.fit->batch_step() : 0;
  const v1::ParallelConfig* sharded = ShardedFit(query);
  const int64_t in_flight = sharded != nullptr ? FsdpInFlightBytes(trace, *sharded) : 0;
  for (size_t t = 0; t < targets.size(); ++t) {
    const int64_t usable = UsableMemoryBytes(*targets[t]);
    out.one_gpu[t] = LargestFittingBatch(*memory, usable, step);
    out.for_fit[t] =
        sharded == nullptr
            ? out.one_gpu[t]
            : FitFsdp(*memory, usable, step, GpusInAll(*sharded), in_flight).largest_batch;
  }
  return out;
}

// `largest`: LargestFittingBatches, one entry per target.
std::vector<BatchGroup> GroupByBatch(const v1::Trace& traced, const PredictionQuery& query,
                                     const std::vector<uint32_t>& largest) {
  const uint32_t asked = query.batch_size != 0 ? query.batch_size : traced.batch_size();
  std::vector<BatchGroup> groups;
  for (size_t t = 0; t < largest.size(); ++t) {
    const uint32_t batch = query.fit.has_value() && largest[t] != 0 ? largest[t] : asked;
    auto group = std::find_if(groups.begin(), groups.end(),
                              [batch](const BatchGroup& g) { return g.batch == batch; });
    if (group == groups.end()) group = groups.insert(groups.end(), BatchGroup{batch, {}});
    group->targets.push_back(t);
  }
  return groups;
}

// Sets the prediction's batch and memory; a GPU the batch does not fit says
// so (PriceAndRank then leaves it unranked).
void AddMemory(const std::optional<MemoryModel>& memory, uint32_t batch, const DeviceSpec& target,
               uint32_t largest_fitting_batch, DevicePrediction* prediction) {
  prediction->set_batch_size(batch);
  if (!memory.has_value()) return;
  *prediction->mutable_memory() = PredictMemory(*memory, batch, target, largest_fitting_batch);
  if (prediction->memory().fits()) return;
  AddOutOfMemoryWarning(batch, prediction);
}

// Whether `configs` already asks for one node of `gpus`.
bool AsksForOneNodeOf(const std::vector<v1::ParallelConfig>& configs, uint32_t gpus) {
  return std::any_of(configs.begin(), configs.end(), [gpus](const v1::ParallelConfig& c) {
    return c.gpus_per_node() == gpus && c.nodes() <= 1;
  });
}

// DevicePrediction.parallel: the request's configurations, then one node of
// each other multi-GPU instance size the catalog offers this GPU in, with
// the request's bucket cap, NVLS setting and kind (its first
// configuration's).
void AddParallel(const absl::StatusOr<TraceIteration>& iteration, const DeviceSpec& target,
                 const PredictionQuery& query, DevicePrediction* prediction) {
  std::vector<v1::ParallelConfig> configs = query.parallel;
  if (query.catalog_instances && query.catalog != nullptr) {
    v1::ParallelConfig node;
    if (!query.parallel.empty()) {
      node.set_bucket_cap_bytes(query.parallel.front().bucket_cap_bytes());
      node.set_disable_nvls(query.parallel.front().disable_nvls());
      node.set_kind(query.parallel.front().kind());
      node.set_fsdp_units(query.parallel.front().fsdp_units());
      node.set_fsdp_wrap(query.parallel.front().fsdp_wrap());
    }
    for (uint32_t gpus : CatalogInstanceSizes(*query.catalog, target.id())) {
      if (AsksForOneNodeOf(query.parallel, gpus)) continue;
      node.set_gpus_per_node(gpus);
      configs.push_back(node);
    }
  }
  for (const v1::ParallelConfig& config : configs) {
    *prediction->add_parallel() =
        PredictParallel(iteration, *prediction, target, config, query.catalog, query.price_kind);
  }
}

// INVALID_ARGUMENT, saying why, where a configuration wraps a module class
// `trace` cannot cut its units by (no modules, or none of that class):
// the whole request, not each GPU's row.
absl::Status CheckFsdpWrap(const v1::Trace& trace, const std::vector<v1::ParallelConfig>& configs) {
  for (const v1::ParallelConfig& config : configs) {
    if (config.kind() != v1::ParallelConfig::KIND_FULLY_SHARDED || config.fsdp_wrap().empty()) {
      continue;
    }
    absl::StatusOr<FsdpModuleUnits> units =
        FsdpUnitsOfModuleClass(trace.modules(), config.fsdp_wrap());
    if (!units.ok()) return absl::InvalidArgumentError(units.status().message());
  }
  return absl::OkStatus();
}

// Takes predicting `trace` on `gpus` GPUs from `work_left`, with the
// once-per-call work when `first` (the host calibration is still to run)
// and the batch scaling of `traced` when `rescaled`; RESOURCE_EXHAUSTED
// when that is more than is left of `max_work` (0: no limit).
absl::Status TakeWork(const v1::Trace& traced, const v1::Trace& trace, size_t gpus, bool first,
                      bool rescaled, int64_t max_work, int64_t* work_left) {
  if (max_work <= 0 || gpus == 0) return absl::OkStatus();
  const int64_t per_device = PredictionWorkPerDevice(trace);
  int64_t work = per_device * static_cast<int64_t>(gpus);
  if (first) work += kPerCallWorkInDevices * PredictionWorkPerDevice(traced);
  if (rescaled) work += PredictionWorkPerDevice(traced);
  if (work > *work_left) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "predicting this trace on ", gpus, " more GPUs is ", work,
        " units of work (trace entries x GPUs, and once per call the host-timeline "
        "calibration), above what is left of this server's limit of ",
        max_work, " (--max_predict_work): ask for fewer GPUs (devices) or send a smaller trace"));
  }
  *work_left -= work;
  return absl::OkStatus();
}

// Each target's same-chip GPUs (VaryingPredictor::PredictTrace).
std::vector<std::vector<const DeviceSpec*>> Siblings(
    const DeviceDatabase& devices, const std::vector<const DeviceSpec*>& targets) {
  std::vector<std::vector<const DeviceSpec*>> siblings(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    for (const DeviceSpec& spec : devices.devices()) {
      if (spec.id() != targets[i]->id() && !spec.test_only() && SameChip(spec, *targets[i])) {
        siblings[i].push_back(&spec);
      }
    }
  }
  return siblings;
}

// Adds `warning` to `warnings`, or its GPUs to the one with its text.
void AddUnique(KindedWarning warning, std::vector<KindedWarning>* warnings) {
  auto same = std::find_if(warnings->begin(), warnings->end(),
                           [&warning](const KindedWarning& w) { return w.text == warning.text; });
  if (same == warnings->end()) {
    warnings->push_back(std::move(warning));
    return;
  }
  for (std::string& id : warning.device_ids) same->device_ids.push_back(std::move(id));
}

// The response's own warnings, in the order of PredictResponse.warnings:
// the batch scaling's, then the trace's memory (why it has no memory model,
// if it has none), spot prices, wall times and the origin's host.
std::vector<KindedWarning> ResponseWarnings(std::vector<KindedWarning> warnings,
                                            const v1::Trace& traced,
                                            const std::optional<std::string>& no_memory_reason,
                                            const PredictionQuery& query,
                                            const std::vector<DevicePrediction>& predictions) {
  if (no_memory_reason.has_value()) {
    warnings.push_back(NoMemoryPredictionWarning(*no_memory_reason));
  }
  if (query.catalog != nullptr && query.price_kind == v1::PRICE_KIND_SPOT) {
    auto warning = MissingSpotPricesWarning(*query.catalog, predictions);
    if (warning.has_value()) warnings.push_back(*std::move(warning));
  }
  auto gpu_time_warning = WallTimeFromGpuTimeWarning(traced, predictions);
  if (gpu_time_warning.has_value()) warnings.push_back(*std::move(gpu_time_warning));
  auto host_bound_warning = OriginHostBoundWarning(traced);
  if (host_bound_warning.has_value()) warnings.push_back(*std::move(host_bound_warning));
  if (query.fsdp_rank_of > 0) warnings.push_back(FsdpRankWarning(query.fsdp_rank_of));
  return warnings;
}

// The single-GPU memory a rank's trace amounts to, where it recorded its
// memory: its units' in-flight bytes from the single-GPU step its work
// amounts to (`single`), cut as the rank's run wrapped them.
std::optional<MemoryModel> FsdpRankMemory(const v1::Trace& rank, const v1::Trace& single,
                                          int world) {
  std::optional<MemoryModel> model = MemoryModelFor(rank);
  if (!model.has_value()) return std::nullopt;
  v1::ParallelConfig config;
  config.set_kind(v1::ParallelConfig::KIND_FULLY_SHARDED);
  config.set_gpus_per_node(static_cast<uint32_t>(std::max(world, 2)));
  config.set_fsdp_units(static_cast<uint32_t>(std::max(FsdpRankUnits(rank), 1)));
  return SingleGpuMemoryOfFsdpRank(*model, world, FsdpInFlightBytes(single, config));
}

// From the first optimizer operation's CPU start to the last one's end: the
// host's time launching the optimizer step.
int64_t OptimizerCpuSpanNs(const v1::Trace& trace) {
  // In doubles: a hostile trace's times may not sum within int64.
  double first = 0, last = 0;
  bool any = false;
  for (const v1::Operation& op : trace.operations()) {
    if (!IsOptimizerStep(op)) continue;
    const double start = static_cast<double>(op.cpu_start_ns());
    first = any ? std::min(first, start) : start;
    last = any ? std::max(last, start + static_cast<double>(op.cpu_duration_ns()))
               : start + static_cast<double>(op.cpu_duration_ns());
    any = true;
  }
  return any ? static_cast<int64_t>(std::clamp(last - first, 0.0, 1e18)) : 0;
}

// Whether any configuration asks for FSDP (the catalog's nodes take the
// first's kind).
bool AsksForSharding(const PredictionQuery& query) {
  return std::any_of(query.parallel.begin(), query.parallel.end(), [](const auto& config) {
    return config.kind() == v1::ParallelConfig::KIND_FULLY_SHARDED;
  });
}

// Calibrates the trace's host scale once (`memo`), for the host speed the
// query names: a faster host takes proportionally less time for its share.
absl::Status EnsureHostScale(const v1::Trace& traced, const PredictionQuery& query,
                             std::optional<std::optional<double>>* memo) {
  if (memo->has_value()) return absl::OkStatus();
  HABITAT_ASSIGN_OR_RETURN(*memo, HostScaleFor(traced, query.stop));
  if ((*memo)->has_value()) ***memo /= query.host_speed;
  return absl::OkStatus();
}

// What FSDP's timeline needs of the host (it lets the host gate the GPU):
// the host's time alone, the optimizer's part of it, and whether FSDP2's
// own host work is already in the timeline (a rank's trace).
struct IterationHost {
  int64_t host_ns = 0;
  int64_t optimizer_host_ns = 0;
  bool fsdp_host_work_traced = false;
};

absl::StatusOr<IterationHost> HostOfIteration(const v1::Trace& traced, const v1::Trace& trace,
                                              const PredictionQuery& query,
                                              std::optional<std::optional<double>>* host_scale) {
  IterationHost out;
  if (!AsksForSharding(query)) return out;
  HABITAT_RETURN_IF_ERROR(EnsureHostScale(traced, query, host_scale));
  const double scale = (*host_scale)->value_or(1.0);
  out.host_ns = HostOnlyNs(trace, scale);
  out.optimizer_host_ns =
      static_cast<int64_t>(std::min(static_cast<double>(OptimizerCpuSpanNs(trace)) * scale, 1e18));
  out.fsdp_host_work_traced = query.fsdp_rank_of > 0;
  return out;
}

// IterationFromTrace with the host's part.
absl::StatusOr<TraceIteration> IterationWithHost(const v1::Trace& trace,
                                                 const DevicePrediction& prediction,
                                                 const IterationHost& host) {
  absl::StatusOr<TraceIteration> iteration = IterationFromTrace(trace, prediction);
  if (iteration.ok()) {
    iteration->iteration.host_ns = host.host_ns;
    iteration->iteration.optimizer_host_ns = host.optimizer_host_ns;
    iteration->fsdp_host_work_traced = host.fsdp_host_work_traced;
  }
  return iteration;
}

}  // namespace

absl::StatusOr<PredictionEngine::BatchPredictions> PredictionEngine::PredictAtBatch(
    const v1::Trace& traced, const std::string& trace_id, const DeviceSpec& origin,
    const std::vector<const DeviceSpec*>& targets, uint32_t batch, const PredictionQuery& query,
    HostScaleMemo* host_scale, int64_t* work_left, PredictionStats* stats) const {
  // At another batch, every GPU (the origin's too) is predicted from the
  // trace scaled to it; the host model stays calibrated on the traced one.
  std::optional<BatchScaledTrace> scaled;
  if (batch != traced.batch_size()) {
    HABITAT_ASSIGN_OR_RETURN(scaled, ScaleTraceToBatch(traced, batch));
  }
  const v1::Trace& trace = scaled.has_value() ? scaled->trace : traced;

  // Predictions for another tenant, host speed or batch are other
  // predictions.
  std::string cache_key = absl::StrCat(query.cache_namespace, "\n", trace_id);
  if (query.host_speed != 1.0) absl::StrAppend(&cache_key, "|host_speed=", query.host_speed);
  if (scaled.has_value()) absl::StrAppend(&cache_key, "|batch=", trace.batch_size());
  // Data-parallel steps are read from each GPU's per-operation breakdown.
  const bool wants_parallel = !query.parallel.empty() || query.catalog_instances;
  const bool keep_breakdown = query.include_breakdown || wants_parallel;
  std::vector<CachedPrediction> cached(targets.size());
  std::vector<const DeviceSpec*> missed;
  for (size_t t = 0; t < targets.size(); ++t) {
    if (cache_ != nullptr) cached[t] = cache_->Lookup(cache_key, targets[t]->id());
    if (!Answers(cached[t], keep_breakdown)) missed.push_back(targets[t]);
  }
  HABITAT_RETURN_IF_ERROR(TakeWork(traced, trace, missed.size(), !host_scale->has_value(),
                                   scaled.has_value(), query.max_work, work_left));
  // Kernel-varying ops of every missed target in one batched model pass.
  std::vector<VaryingPassTable> varying_tables;
  if (varying_ != nullptr && !missed.empty()) {
    const auto siblings = Siblings(*devices_, missed);
    HABITAT_ASSIGN_OR_RETURN(varying_tables,
                             varying_->PredictTrace(trace, origin, missed, query.stop, &siblings));
  }
  HABITAT_ASSIGN_OR_RETURN(const IterationHost host,
                           HostOfIteration(traced, trace, query, host_scale));
  BatchPredictions out;
  out.predictions.reserve(targets.size());
  const TraceFacts facts = missed.empty() ? TraceFacts() : FactsOf(trace);
  size_t miss_index = 0;
  stats->operations_by_device.reserve(stats->operations_by_device.size() + missed.size());
  for (size_t t = 0; t < targets.size(); ++t) {
    const DeviceSpec* target = targets[t];
    CachedPrediction& entry = cached[t];
    if (Answers(entry, keep_breakdown)) {
      ++stats->cache_hits;
    } else {
      ++stats->cache_misses;
      HABITAT_RETURN_IF_ERROR(EnsureHostScale(traced, query, host_scale));
      const VaryingPassTable* table =
          varying_tables.empty() ? nullptr : &varying_tables[miss_index];
      ++miss_index;
      HABITAT_ASSIGN_OR_RETURN(
          DevicePrediction fresh,
          PredictOnDeviceWith(trace, facts, origin, *target, **host_scale, table, query.stop));
      if (scaled.has_value()) MarkBatchScaled(*scaled, &fresh);
      PredictionStats::DeviceOperations& by_device = stats->operations_by_device.emplace_back();
      by_device.device_id = target->id();
      for (const auto& op : fresh.operations()) {
        ++stats->operations_by_method[op.method()];
        ++by_device.by_method[op.method()];
      }
      entry = ForTheCache(std::move(fresh), keep_breakdown);
      if (cache_ != nullptr) cache_->Insert(cache_key, target->id(), entry);
    }
    DevicePrediction& emitted =
        out.predictions.emplace_back(query.include_breakdown ? *entry.full : *entry.summary);
    if (wants_parallel) {
      emitted.set_batch_size(batch);
      AddParallel(IterationWithHost(trace, *entry.full, host), *target, query, &emitted);
    }
  }
  if (scaled.has_value()) out.warnings = BatchScalingWarnings(*scaled, traced.batch_size());
  return out;
}

absl::StatusOr<v1::PredictResponse> PredictionEngine::PredictFsdpRank(
    const v1::Trace& traced, int world, std::string trace_id, const PredictionQuery& query,
    PredictionStats* stats) const {
  const v1::Trace step = SingleGpuStepOfFsdpRank(traced, world);
  PredictionQuery single = query;
  single.fsdp_rank_of = world;
  single.fsdp_rank_memory = FsdpRankMemory(traced, step, world);
  // Units as the rank's run wrapped them, unless the request names a count
  // or a class.
  for (v1::ParallelConfig& config : single.parallel) {
    if (config.kind() == v1::ParallelConfig::KIND_FULLY_SHARDED && config.fsdp_units() == 0 &&
        config.fsdp_wrap().empty()) {
      config.set_fsdp_units(static_cast<uint32_t>(FsdpRankUnits(traced)));
    }
  }
  single.trace_already_validated = true;
  // The rank's host ran as its measured step says, communication and all.
  HABITAT_RETURN_IF_ERROR(EnsureHostScale(traced, query, &single.fsdp_rank_host_scale));
  if (!trace_id.empty()) absl::StrAppend(&trace_id, "|fsdp_rank");
  return Predict(step, std::move(trace_id), single, stats);
}

namespace {

// What a response says about the request as a whole, before its
// predictions and warnings.
v1::PredictResponse ResponseHeader(const v1::Trace& traced, const std::string& trace_id,
                                   const DeviceSpec& origin, const PredictionQuery& query) {
  v1::PredictResponse response;
  response.set_trace_id(trace_id);
  response.set_origin_device_id(origin.id());
  // With a fit each prediction has its own batch.
  response.set_batch_size(query.fit.has_value()   ? 0
                          : query.batch_size != 0 ? query.batch_size
                                                  : traced.batch_size());
  response.set_traced_batch_size(traced.batch_size());
  response.set_model_name(traced.model_name());
  response.set_precision(traced.precision());
  response.set_price_kind(query.price_kind);
  if (query.catalog != nullptr) {
    response.set_catalog(query.catalog->name());
    response.set_currency(query.catalog->currency());
  }
  return response;
}

}  // namespace

absl::StatusOr<v1::PredictResponse> PredictionEngine::Predict(const v1::Trace& traced,
                                                              std::string trace_id,
                                                              const PredictionQuery& query,
                                                              PredictionStats* stats) const {
  if (!query.trace_already_validated) HABITAT_RETURN_IF_ERROR(ValidateTrace(traced));
  HABITAT_RETURN_IF_ERROR(CheckFsdpWrap(traced, query.parallel));
  if (query.fsdp_rank_of == 0) {
    HABITAT_ASSIGN_OR_RETURN(const std::optional<int> world, FsdpRankWorldSize(traced));
    if (world.has_value())
      return PredictFsdpRank(traced, *world, std::move(trace_id), query, stats);
  }
  HABITAT_ASSIGN_OR_RETURN(const DeviceSpec* origin, ResolveOrigin(traced));
  if (trace_id.empty()) {
    HABITAT_ASSIGN_OR_RETURN(trace_id, ComputeTraceId(traced));
  }
  HABITAT_ASSIGN_OR_RETURN(const std::vector<const DeviceSpec*> targets,
                           ResolveTargets(query.devices));
  std::string no_memory_reason;
  const std::optional<MemoryModel> memory =
      query.fsdp_rank_of > 0 ? query.fsdp_rank_memory : MemoryModelFor(traced, &no_memory_reason);
  if (query.fsdp_rank_of > 0 && !memory.has_value()) {
    no_memory_reason = "the FSDP rank's trace recorded no memory";
  }
  if (query.fit.has_value() && !memory.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("a fit needs the trace's memory: ", no_memory_reason));
  }

  PredictionStats local_stats;
  if (stats == nullptr) stats = &local_stats;
  int64_t work_left = query.max_work;
  // Per trace, not per device or batch: computed at the first cache miss.
  HostScaleMemo host_scale = query.fsdp_rank_host_scale;
  std::vector<DevicePrediction> predictions(targets.size());
  std::vector<KindedWarning> batch_warnings;
  const FittingBatches largest = LargestFittingBatches(traced, memory, query, targets);
  const std::optional<uint32_t> fit_step =
      query.fit.has_value() ? std::optional<uint32_t>(query.fit->batch_step()) : std::nullopt;
  for (const BatchGroup& group : GroupByBatch(traced, query, largest.for_fit)) {
    std::vector<const DeviceSpec*> group_targets;
    for (size_t t : group.targets) group_targets.push_back(targets[t]);
    HABITAT_ASSIGN_OR_RETURN(BatchPredictions part,
                             PredictAtBatch(traced, trace_id, *origin, group_targets, group.batch,
                                            query, &host_scale, &work_left, stats));
    for (size_t i = 0; i < group.targets.size(); ++i) {
      const size_t t = group.targets[i];
      predictions[t] = std::move(part.predictions[i]);
      AddMemory(memory, group.batch, *targets[t], largest.one_gpu[t], &predictions[t]);
      if (memory.has_value()) {
        AddFsdpMemory(*memory, group.batch, UsableMemoryBytes(*targets[t]), fit_step,
                      &predictions[t]);
      }
    }
    for (KindedWarning& warning : part.warnings) {
      for (const DeviceSpec* target : group_targets) warning.device_ids.push_back(target->id());
      AddUnique(std::move(warning), &batch_warnings);
    }
  }
  PriceAndRank(query.catalog, query.price_kind, &predictions);
  // A rank's single-GPU step is how its work moves to each GPU, not a
  // configuration to rent: the model may not fit one GPU.
  if (query.fsdp_rank_of > 0) Unrank(&predictions);

  v1::PredictResponse response = ResponseHeader(traced, trace_id, *origin, query);
  const std::vector<KindedWarning> warnings = ResponseWarnings(
      std::move(batch_warnings), traced,
      memory.has_value() ? std::nullopt : std::optional<std::string>(no_memory_reason), query,
      predictions);
  for (const KindedWarning& warning : warnings) response.add_warnings(warning.text);
  for (auto& p : predictions) *response.add_predictions() = std::move(p);
  AddStructuredWarnings(warnings, &response);
  return response;
}

}  // namespace habitat
