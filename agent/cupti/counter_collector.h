// CounterSource over the CUPTI Range Profiler API (CUDA 12.6+, here 13):
// auto ranges (one range per kernel launch). By default with user replay:
// the caller's work (one training step) runs once per hardware pass, so a
// ResNet-50 step costs about passes x one step. Kernel replay (one run,
// CUPTI replays each kernel per pass, saving and restoring the device
// memory it touches in between) needs no repeatable work but took over
// 100 s for ResNet-50's 717 launches on an H100.
//
// Setup per Collect(): profiler initialise, device support check, chip
// name and counter availability of the current context's device, a host
// object that turns metric names into a config image, then enable, set the
// config, start, run the work, stop, decode and evaluate every range; the
// profiler is torn down on every path. The metrics are Options::metrics,
// or by default kernel_counters.h's scalar metrics plus the tensor metrics
// the device has; names the device does not know are left out (listed in
// missing_metrics()).
//
// Without profiling permission (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) or
// support the error says what is missing and how to enable it. Only one
// CUPTI client at a time: do not call this while a CuptiActivitySource is
// started. Errors are returned and logged, never thrown.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "agent/capture/counter_source.h"
#include "agent/capture/status.h"

namespace habitat {
namespace agent {

class CuptiCounterCollector : public CounterSource {
 public:
  struct Options {
    // Metric names with rollup ("dram__bytes_read.sum"); empty: defaults.
    std::vector<std::string> metrics;
    // Run the work once per pass (it must launch the same kernels each
    // time) instead of replaying every kernel inside one run.
    bool user_replay = true;
  };

  CuptiCounterCollector() = default;
  explicit CuptiCounterCollector(Options options) : options_(std::move(options)) {}

  Status Collect(const std::function<Status()>& work, size_t max_kernels,
                 CounterPass* out) override;

  // The base metrics (no rollup) of the current context's device whose name
  // contains `part` (all when empty), of type counter.
  Status ListBaseMetrics(const std::string& part, std::vector<std::string>* out);

  // Metrics of the last Collect() the device did not have.
  const std::vector<std::string>& missing_metrics() const { return missing_metrics_; }
  const std::string& chip_name() const { return chip_name_; }

 private:
  Options options_;
  std::vector<std::string> missing_metrics_;
  std::string chip_name_;
};

}  // namespace agent
}  // namespace habitat
