// A few numbers that tell the user what a capture holds, printed by the
// Python front end when tracking ends.
#pragma once

#include <cstdint>
#include <string>

#include "agent/capture/trace_model.h"

namespace habitat {
namespace agent {

struct TraceSummary {
  int64_t operations = 0;
  int64_t operations_with_backward = 0;
  int64_t kernels = 0;  // attributed + unattributed
  int64_t unattributed_kernels = 0;
  int64_t memory_activities = 0;
  int64_t pass_time_ns = 0;  // sum of all passes' time_ns
  int64_t unattributed_kernel_ns = 0;
  int64_t gpu_busy_ns = 0;
  int64_t wall_ns = 0;
};

TraceSummary Summarize(const Trace& trace);

// One line, e.g. "habitat: 321 ops (161 with backward), 1042 kernels
// (3 unattributed), GPU busy 41.2 ms of 55.0 ms wall, per-op sum 40.9 ms".
std::string FormatSummary(const TraceSummary& s);

}  // namespace agent
}  // namespace habitat
