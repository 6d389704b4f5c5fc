// Closed-loop load on PredictionService.Predict through gRPC's callback API:
// `concurrency` callers, spread over `channels` TCP connections, each keeps
// one request in flight and sends the next as soon as the answer arrives.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {
namespace load_test {

struct LoadOptions {
  std::string address;  // host:port
  int channels = 2;
  int concurrency = 32;
  absl::Duration deadline = absl::Seconds(10);
  // Calls are sent from the start; only those that start after `warmup`
  // and finish before warmup + duration are measured.
  absl::Duration warmup = absl::Seconds(5);
  absl::Duration duration = absl::Seconds(60);
  // Every answer must hold this many predictions (0: not checked).
  int expected_predictions = 0;
};

struct LoadResult {
  int64_t calls = 0;     // all completed calls, warm-up included
  int64_t measured = 0;  // completed inside the measurement window
  double seconds = 0;    // length of the measurement window
  // Failed calls anywhere in the run, by gRPC status code name; answers
  // with the wrong number of predictions count as "WRONG_ANSWER".
  std::map<std::string, int64_t> errors;
  std::vector<int64_t> latencies_ns;  // of the measured calls, sorted

  int64_t error_count() const;
  double calls_per_second() const { return seconds > 0 ? measured / seconds : 0; }
  // q in [0, 1]; 0 when nothing was measured.
  int64_t Percentile(double q) const;
};

// Runs until warm-up + duration have passed and every call has finished.
// `on_measure_start` runs once, on the calling thread, when the warm-up
// ends (the load test samples the server's memory there); `on_tick` about
// every 100 ms during the run.
template <typename OnMeasureStart, typename OnTick>
LoadResult RunLoad(const LoadOptions& options, const habitat::v1::PredictRequest& request,
                   OnMeasureStart on_measure_start, OnTick on_tick);

// Non-template core of RunLoad.
class LoadHooks {
 public:
  virtual ~LoadHooks() = default;
  virtual void MeasureStart() = 0;
  virtual void Tick() = 0;
};
LoadResult RunLoadWithHooks(const LoadOptions& options, const habitat::v1::PredictRequest& request,
                            LoadHooks* hooks);

template <typename OnMeasureStart, typename OnTick>
LoadResult RunLoad(const LoadOptions& options, const habitat::v1::PredictRequest& request,
                   OnMeasureStart on_measure_start, OnTick on_tick) {
  struct Hooks : LoadHooks {
    Hooks(OnMeasureStart& start, OnTick& tick) : start_(start), tick_(tick) {}
    void MeasureStart() override { start_(); }
    void Tick() override { tick_(); }
    OnMeasureStart& start_;
    OnTick& tick_;
  } hooks(on_measure_start, on_tick);
  return RunLoadWithHooks(options, request, &hooks);
}

}  // namespace load_test
}  // namespace habitat
