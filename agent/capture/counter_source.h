// Where hardware counters come from. The CUPTI range profiler
// (agent/cupti/counter_collector.h) is the real one; tests use
// FakeCounterSource.
//
// A source profiles every kernel launched while `work` runs, one range per
// kernel launch in launch order (CUPTI's auto ranges), and reports the raw
// metric values of each range; kernel_counters.h turns them into
// KernelCounters and joins them to the kernels of the tracked iteration.
// The counter pass is a separate run of the iteration: CUPTI does not allow
// the activity capture and the profiler at the same time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/capture/status.h"

namespace habitat {
namespace agent {

// One profiled kernel launch.
struct RangeMetrics {
  // The kernel's name as the range profiler names the range (demangled
  // like the activity records' names).
  std::string kernel_name;
  // One value per CounterPass::metric_names entry.
  std::vector<double> values;
};

struct CounterPass {
  std::vector<std::string> metric_names;
  std::vector<RangeMetrics> ranges;  // launch order
  // Launches the profiler could not keep (counter image full).
  uint64_t dropped_ranges = 0;
  // Hardware passes each kernel was replayed for.
  size_t replay_passes = 0;
};

class CounterSource {
 public:
  virtual ~CounterSource() = default;

  // Runs `work` once under the profiler. `max_kernels` sizes the counter
  // image (launches beyond it are dropped and counted). An error from
  // `work` is returned as is, after the profiler is torn down.
  virtual Status Collect(const std::function<Status()>& work, size_t max_kernels,
                         CounterPass* out) = 0;
};

}  // namespace agent
}  // namespace habitat
