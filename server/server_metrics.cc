#include "server/server_metrics.h"

#include <iterator>
#include <optional>

#include "absl/status/status.h"

namespace habitat {

const char* RpcName(Rpc rpc) {
  switch (rpc) {
    case Rpc::kPredict:
      return "Predict";
    case Rpc::kUploadTrace:
      return "UploadTrace";
    case Rpc::kListDevices:
      return "ListDevices";
    case Rpc::kListCatalogs:
      return "ListCatalogs";
    default:
      return "unknown";
  }
}

std::vector<double> LatencyBuckets(absl::Duration max_request_time) {
  // 1-2.5-5 steps below a second, then the round numbers people set caps to.
  static constexpr double kBounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                       0.025,  0.05,    0.1,    0.25,  0.5,    1.0,   2.5,
                                       5.0,    10.0,    30.0,   60.0,  120.0,  300.0, 600.0};
  const double cap = max_request_time > absl::ZeroDuration()
                         ? absl::ToDoubleSeconds(max_request_time)
                         : kBounds[std::size(kBounds) - 1];
  std::vector<double> buckets;
  for (double bound : kBounds) {
    if (bound < cap) buckets.push_back(bound);
  }
  buckets.push_back(cap);
  return buckets;
}

namespace {
const char* MethodLabel(int method) {
  switch (method) {
    case 1:
      return "wave_scaling";
    case 2:  // kernel-varying: the label the dashboards already know
      return "mlp";
    case 3:
      return "unscaled";
    case 4:
      return "measured";
    default:
      return "unspecified";
  }
}
}  // namespace

ServerMetrics::ServerMetrics(prometheus::Registry& registry,
                             const std::vector<std::string>& device_ids,
                             absl::Duration max_request_time) {
  auto& requests = prometheus::BuildCounter()
                       .Name("habitat_requests_total")
                       .Help("Finished RPCs by method and gRPC status code")
                       .Register(registry);
  auto& latency = prometheus::BuildHistogram()
                      .Name("habitat_request_duration_seconds")
                      .Help("RPC handling time in seconds, by method")
                      .Register(registry);
  const prometheus::Histogram::BucketBoundaries buckets = LatencyBuckets(max_request_time);
  for (int rpc = 0; rpc < static_cast<int>(Rpc::kCount); ++rpc) {
    const char* name = RpcName(static_cast<Rpc>(rpc));
    for (int code = 0; code < kCodes; ++code) {
      requests_[rpc][code] = &requests.Add(
          {{"rpc", name}, {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code))}});
    }
    latency_[rpc] = &latency.Add({{"rpc", name}}, buckets);
  }
  predictions_family_ =
      &prometheus::BuildCounter()
           .Name("habitat_predicted_operations_total")
           .Help(
               "Operation predictions computed (not served from cache), by method and "
               "target device")
           .Register(registry);
  for (const std::string& device : device_ids) {
    MethodCounters& counters = predictions_[device];
    for (int method = 0; method < kMethods; ++method) {
      counters[method] =
          &predictions_family_->Add({{"method", MethodLabel(method)}, {"device", device}});
    }
  }
  auto& cache = prometheus::BuildCounter()
                    .Name("habitat_prediction_cache_total")
                    .Help("Per-(trace, device) prediction cache lookups by result")
                    .Register(registry);
  cache_hits_ = &cache.Add({{"result", "hit"}});
  cache_misses_ = &cache.Add({{"result", "miss"}});
  cache_bytes_ = &prometheus::BuildGauge()
                      .Name("habitat_prediction_cache_bytes")
                      .Help("Bytes held by memoised predictions (bounded by --cache_mib)")
                      .Register(registry)
                      .Add({});
  stored_traces_ = &prometheus::BuildGauge()
                        .Name("habitat_stored_traces")
                        .Help("Traces in the trace store")
                        .Register(registry)
                        .Add({});
  devices_loaded_ = &prometheus::BuildGauge()
                         .Name("habitat_devices_loaded")
                         .Help("GPUs in the loaded spec database")
                         .Register(registry)
                         .Add({});
  in_flight_ = &prometheus::BuildGauge()
                    .Name("habitat_rpcs_in_flight")
                    .Help("RPCs being handled now")
                    .Register(registry)
                    .Add({});
  queued_ = &prometheus::BuildGauge()
                 .Name("habitat_rpcs_queued")
                 .Help("Admitted Predict and UploadTrace calls waiting for a work thread")
                 .Register(registry)
                 .Add({});
  auto& reloads = prometheus::BuildCounter()
                      .Name("habitat_token_reloads_total")
                      .Help("Reloads of the token file (SIGHUP) by result")
                      .Register(registry);
  token_reloads_ok_ = &reloads.Add({{"result", "ok"}});
  token_reloads_failed_ = &reloads.Add({{"result", "error"}});
}

void ServerMetrics::RecordRequest(Rpc rpc, absl::StatusCode code, double seconds) {
  const int index = static_cast<int>(code);
  requests_[static_cast<int>(rpc)][index >= 0 && index < kCodes ? index : 2]->Increment();
  latency_[static_cast<int>(rpc)]->Observe(seconds);
}

ServerMetrics::MethodCounters ServerMetrics::PredictionCounters(absl::string_view device_id) {
  auto known = predictions_.find(device_id);
  if (known != predictions_.end()) return known->second;
  absl::MutexLock lock(&extra_mutex_);
  auto [it, inserted] = extra_predictions_.try_emplace(device_id);
  if (inserted) {
    for (int method = 0; method < kMethods; ++method) {
      it->second[method] = &predictions_family_->Add(
          {{"method", MethodLabel(method)}, {"device", std::string(device_id)}});
    }
  }
  // By value: flat_hash_map moves its values when it grows.
  return it->second;
}

void ServerMetrics::RecordPredictions(absl::string_view device_id,
                                      const int64_t (&by_method)[kMethods]) {
  std::optional<MethodCounters> counters;
  for (int method = 0; method < kMethods; ++method) {
    if (by_method[method] <= 0) continue;
    if (!counters.has_value()) counters = PredictionCounters(device_id);
    (*counters)[method]->Increment(static_cast<double>(by_method[method]));
  }
}

void ServerMetrics::RecordCache(int hits, int misses, size_t bytes) {
  if (hits > 0) cache_hits_->Increment(hits);
  if (misses > 0) cache_misses_->Increment(misses);
  cache_bytes_->Set(static_cast<double>(bytes));
}

void ServerMetrics::SetStoredTraces(double count) { stored_traces_->Set(count); }
void ServerMetrics::SetDevicesLoaded(double count) { devices_loaded_->Set(count); }
void ServerMetrics::AddInFlight(double delta) { in_flight_->Increment(delta); }
void ServerMetrics::AddQueued(double delta) { queued_->Increment(delta); }
void ServerMetrics::RecordTokenReload(bool ok) {
  (ok ? token_reloads_ok_ : token_reloads_failed_)->Increment();
}

}  // namespace habitat
