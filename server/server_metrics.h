// Prometheus metrics of the prediction server. Families and labelled
// handles are created once at start-up (prometheus-cpp throws on bad names,
// which must never happen per request); handlers only increment.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "habitat/v1/prediction_service.pb.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace habitat {

enum class Rpc { kPredict = 0, kUploadTrace, kListDevices, kListCatalogs, kCount };

const char* RpcName(Rpc rpc);

// Upper bounds, in seconds, of the latency histogram's buckets: from 100 us
// up to the longest a call may run (`max_request_time`, the server's cap;
// zero means no cap, and the buckets then end at ten minutes), so a slow
// call lands in a bucket that says how slow instead of only in +Inf.
std::vector<double> LatencyBuckets(absl::Duration max_request_time);

class ServerMetrics {
 public:
  // `device_ids`: the GPUs predictions can target (the device database);
  // their per-device children are created here, so counting one is a hash
  // lookup with no allocation and no lock.
  ServerMetrics(prometheus::Registry& registry, const std::vector<std::string>& device_ids,
                absl::Duration max_request_time);

  // Records one finished RPC with its status code and latency.
  void RecordRequest(Rpc rpc, absl::StatusCode code, double seconds);
  // Operation predictions made (cache misses only) on one target device,
  // by method (index = PredictionMethod value).
  void RecordPredictions(absl::string_view device_id,
                         const int64_t (&by_method)[habitat::v1::PredictionMethod_ARRAYSIZE]);
  // Cache lookups of one Predict, and the cache's size after it.
  void RecordCache(int hits, int misses, size_t bytes);
  void SetStoredTraces(double count);
  void SetDevicesLoaded(double count);
  // RPCs being handled now (admitted or about to be refused).
  void AddInFlight(double delta);
  // Admitted RPCs waiting for a work thread.
  void AddQueued(double delta);
  // One reload of the token file (SIGHUP), successful or not.
  void RecordTokenReload(bool ok);

 private:
  static constexpr int kCodes = 17;
  static constexpr int kMethods = habitat::v1::PredictionMethod_ARRAYSIZE;
  std::array<std::array<prometheus::Counter*, kCodes>, static_cast<int>(Rpc::kCount)> requests_;
  std::array<prometheus::Histogram*, static_cast<int>(Rpc::kCount)> latency_;
  using MethodCounters = std::array<prometheus::Counter*, kMethods>;
  MethodCounters PredictionCounters(absl::string_view device_id);

  prometheus::Family<prometheus::Counter>* predictions_family_;
  // Filled in the constructor, read-only afterwards.
  absl::flat_hash_map<std::string, MethodCounters> predictions_;
  // A device not in the database (none today): its children are made on
  // first use and kept here.
  absl::Mutex extra_mutex_;
  absl::flat_hash_map<std::string, MethodCounters> extra_predictions_ ABSL_GUARDED_BY(extra_mutex_);
  prometheus::Counter* cache_hits_;
  prometheus::Counter* cache_misses_;
  prometheus::Gauge* cache_bytes_;
  prometheus::Gauge* stored_traces_;
  prometheus::Gauge* devices_loaded_;
  prometheus::Gauge* in_flight_;
  prometheus::Gauge* queued_;
  prometheus::Counter* token_reloads_ok_;
  prometheus::Counter* token_reloads_failed_;
};

}  // namespace habitat
