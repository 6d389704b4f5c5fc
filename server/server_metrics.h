// Prometheus metrics of the prediction server. Families and labelled
// handles are created once at start-up (prometheus-cpp throws on bad names,
// which must never happen per request); handlers only increment.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "habitat/v1/prediction_service.pb.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace habitat {

enum class Rpc { kPredict = 0, kUploadTrace, kListDevices, kListCatalogs, kCount };

const char* RpcName(Rpc rpc);

class ServerMetrics {
 public:
  explicit ServerMetrics(prometheus::Registry& registry);

  // Records one finished RPC with its status code and latency.
  void RecordRequest(Rpc rpc, absl::StatusCode code, double seconds);
  // Operation predictions made (cache misses only), by method.
  void RecordPredictions(int method, int64_t count);
  void RecordCache(int hits, int misses);
  void SetStoredTraces(double count);
  void SetDevicesLoaded(double count);
  // RPCs being handled now (admitted or about to be refused).
  void AddInFlight(double delta);
  // One reload of the token file (SIGHUP), successful or not.
  void RecordTokenReload(bool ok);

 private:
  static constexpr int kCodes = 17;
  static constexpr int kMethods = habitat::v1::PredictionMethod_ARRAYSIZE;
  std::array<std::array<prometheus::Counter*, kCodes>, static_cast<int>(Rpc::kCount)> requests_;
  std::array<prometheus::Histogram*, static_cast<int>(Rpc::kCount)> latency_;
  std::array<prometheus::Counter*, kMethods> predictions_;
  prometheus::Counter* cache_hits_;
  prometheus::Counter* cache_misses_;
  prometheus::Gauge* stored_traces_;
  prometheus::Gauge* devices_loaded_;
  prometheus::Gauge* in_flight_;
  prometheus::Counter* token_reloads_ok_;
  prometheus::Counter* token_reloads_failed_;
};

}  // namespace habitat
