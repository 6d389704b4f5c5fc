// The structure of a parsed Kineto trace the importer needs: cpu_op nesting
// per thread, profiler steps, and where each GPU activity was launched from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "common/time_units.h"
#include "core/kineto/kineto_events.h"

namespace habitat {
namespace kineto {

// "ProfilerStep#12" -> 12; false for any other name.
bool ParseProfilerStep(absl::string_view name, int64_t* step);

struct ProfilerStep {
  int64_t number = 0;
  int host_index = 0;  // into ParsedTrace::host
};

// Profiler step annotations, in start order.
std::vector<ProfilerStep> FindProfilerSteps(const ParsedTrace& trace);

// Nesting of cpu_op events (profiler-step annotations excluded), per thread.
class OpForest {
 public:
  explicit OpForest(const ParsedTrace& trace);

  bool IsCpuOp(int i) const { return root_[i] >= 0; }
  // Enclosing cpu_op, -1 for top-level ops (and for non-cpu_op events).
  int parent(int i) const { return parent_[i]; }
  // Top-level ancestor (itself when top-level), -1 for non-cpu_op events.
  int root(int i) const { return root_[i]; }
  // The top-level cpu_op on `thread` whose [start, end] contains `t`, or -1.
  int TopLevelAt(const std::string& thread, Nanoseconds t) const;

 private:
  const ParsedTrace& trace_;
  std::vector<int> parent_;
  std::vector<int> root_;
  absl::flat_hash_map<std::string, std::vector<int>> top_level_by_thread_;
};

// Where a GPU activity came from.
struct Launch {
  int runtime_index = -1;  // cuda_runtime/cuda_driver event, -1 if none
  int external_op = -1;    // cpu_op with the same External id, -1 if none
  // Host time the activity belongs to: the launch call's start, else the
  // External-id op's start, else the activity's own GPU start.
  Nanoseconds host_time = 0;
};

class LaunchIndex {
 public:
  explicit LaunchIndex(const ParsedTrace& trace);
  Launch Find(const DeviceEvent& event) const;

 private:
  const ParsedTrace& trace_;
  absl::flat_hash_map<int64_t, int> runtime_by_correlation_;
  absl::flat_hash_map<int64_t, int> cpu_op_by_external_id_;
};

}  // namespace kineto
}  // namespace habitat
