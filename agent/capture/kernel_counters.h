// Hardware counters per kernel: which metrics are asked for, how their raw
// values become KernelCounters, which kernels are worth measuring and how
// the ranges of a counter pass are joined back to the kernels of the
// tracked iteration. Pure C++, so it is tested without a GPU.
//
// Joining: the counter pass is a second run of the iteration; the profiler
// names each range after its kernel, in launch order. The tracked
// iteration's kernels, in launch (correlation id) order, are walked side
// by side with the ranges: equal names are a match; on a mismatch the
// shorter skip (within a window) that resynchronises the two sequences is
// taken, so a kernel that only one run launched does not shift every later
// match. (If no range name equals its kernel's but the counts agree, the
// join is by position.) A matched range gives the counters of its kernel's key (name,
// grid, block, shared memory); the first range of a key is kept, so a
// kernel launched many times is measured once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "agent/capture/counter_source.h"
#include "agent/capture/records.h"
#include "agent/capture/status.h"
#include "agent/capture/trace_model.h"

namespace habitat {
namespace agent {

// The profiler metrics KernelCounters are computed from (Hopper names, as
// Nsight Compute spells them; the collector drops names the device does
// not list). FLOPs per precision are add + mul + 2 * fma thread
// instructions, as Nsight Compute's roofline counts them. Tensor-core work
// comes from the sm__ops_path_tensor_* metrics the device lists
// (TensorCounterMetrics), which count FLOPs (checked on an H100 against
// 2*M*N*K, see kernel_counters.cc).
extern const char* const kDramReadMetric;      // dram__bytes_read.sum
extern const char* const kDramWriteMetric;     // dram__bytes_write.sum
extern const char* const kTensorMetricPrefix;  // sm__ops_path_tensor_
// The scalar metrics (dram and the nine d/f/h add/mul/fma ones).
std::vector<std::string> ScalarCounterMetrics();
// Of the device's base counter metrics (without rollup), the tensor ones
// to collect, as "<name>.sum".
std::vector<std::string> TensorCounterMetrics(const std::vector<std::string>& base_metrics);

// KernelCounters from one range's values. Unknown metric names are
// ignored; INVALID_ARGUMENT when names and values differ in length.
// Negative or non-finite values (evaluation noise) count as 0.
Status CountersFromMetrics(const std::vector<std::string>& names, const std::vector<double>& values,
                           KernelCounters* out);

struct KernelKey {
  std::string name;
  Dim3 grid;
  Dim3 block;
  uint32_t static_shared_memory_bytes = 0;
  uint32_t dynamic_shared_memory_bytes = 0;

  bool operator<(const KernelKey& o) const {
    return std::tie(name, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                    static_shared_memory_bytes, dynamic_shared_memory_bytes) <
           std::tie(o.name, o.grid.x, o.grid.y, o.grid.z, o.block.x, o.block.y, o.block.z,
                    o.static_shared_memory_bytes, o.dynamic_shared_memory_bytes);
  }
};

KernelKey KeyOf(const KernelRecord& k);
KernelKey KeyOf(const Kernel& k);

// The keys whose kernels make up the top `fraction` (0, 1] of the total
// kernel time (the paper measures those making up 99.5%): keys sorted by
// their summed duration, longest first, taken until the running sum
// reaches fraction * total. INVALID_ARGUMENT for a fraction outside (0, 1].
Status TopKernelKeys(const std::vector<KernelRecord>& kernels, double fraction,
                     std::set<KernelKey>* out);

using CounterCache = std::map<KernelKey, KernelCounters>;

struct JoinStats {
  size_t ranges = 0;
  size_t kernels = 0;
  size_t matched = 0;          // ranges joined to a kernel by name
  size_t skipped_ranges = 0;   // ranges with no kernel (resynchronised)
  size_t skipped_kernels = 0;  // kernels with no range
  size_t new_keys = 0;         // wanted keys measured by this pass
  size_t wanted_missing = 0;   // wanted keys still without counters
  bool by_position = false;    // no name matched: joined by position
};

// Joins `pass` to `kernels` (the tracked iteration's records, any order;
// they are ordered by correlation id here) and adds, for every wanted key
// not yet in `cache`, the counters of its first matched range.
Status JoinCounters(const std::vector<KernelRecord>& kernels, const CounterPass& pass,
                    const std::set<KernelKey>& wanted, CounterCache* cache, JoinStats* stats);

struct CounterReport {
  size_t wanted_keys = 0;    // keys in the top fraction of kernel time
  size_t cached_before = 0;  // of those, already measured
  bool ran = false;          // false: all wanted keys were cached
  size_t replay_passes = 0;
  uint64_t dropped_ranges = 0;
  JoinStats join;
};

// The whole counter step for one tracked iteration: picks the keys of the
// top `fraction` of kernel time, and unless all are cached runs `work`
// once under `source` and joins the ranges into `cache`. The counter image
// is sized for the tracked iteration's launches with some headroom.
Status CollectKernelCounters(const std::vector<KernelRecord>& kernels, double fraction,
                             CounterSource* source, const std::function<Status()>& work,
                             CounterCache* cache, CounterReport* report);

// Sets `counters` on every kernel of `trace` (passes and unattributed)
// whose key is in `cache`; returns how many were set.
size_t AttachCounters(const CounterCache& cache, Trace* trace);

}  // namespace agent
}  // namespace habitat
