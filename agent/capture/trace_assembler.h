// Joins the op events and GPU activity records of one tracked region into a
// Trace (trace_model.h), the same structure core/kineto builds from a
// torch.profiler export, so both feed the same predictor.
//
// Mapping:
//  - Operations are the top-level op events (parent_id 0) that start in the
//    window, in start order.
//  - A GPU activity belongs to the top-level op whose subtree holds the op
//    whose id was the external correlation id of its launch; activities
//    with no (known) external id are unattributed. Activities launched
//    outside the window are dropped and counted in metadata.
//  - A top-level op whose subtree holds an autograd node record
//    (is_backward) is a backward op; the node (the earliest such record)
//    gives its name, sequence number and forward thread. It is linked to
//    the forward top-level op, on that thread, whose subtree recorded that
//    sequence number and that started last before it (sequence numbers
//    are peeked before the node takes one, so an earlier op may share it;
//    the op creating the node is the last). All nodes linked to one forward
//    op form its backward Pass, named after the node with most GPU time.
//    Unlinked nodes (AccumulateGrad, ...) become operations of their own
//    with an empty forward and their work in `backward`.
//  - Pass.time_ns is the sum of its kernel and memory durations;
//    iteration_gpu_busy_ns is the union of all the window's activity
//    intervals; iteration_wall_ns the window's length unless overridden.
//  - Times in the trace are relative to the window start; GPU starts
//    before it (clock skew) are clamped to 0 and counted.
//  - Host events are the window's API calls that make the host wait:
//    synchronisations and (non-async and async) memcpy calls.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/capture/records.h"
#include "agent/capture/status.h"
#include "agent/capture/trace_model.h"

namespace habitat {
namespace agent {

// One operation re-run alone with its recorded inputs (habitat_agent.rerun):
// median times of its forward and backward, CUDA events, ns.
struct RerunTime {
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;  // 0: not measured
};

// The same re-run with the batch-carrying inputs at another batch size
// (habitat_agent.rerun.measure_at_batches); 0: that pass was not measured.
struct BatchRerunTime {
  uint32_t batch_size = 0;
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;
};

struct AssemblyOptions {
  std::string model_name;
  uint32_t batch_size = 0;
  Precision precision = Precision::kUnspecified;
  OriginDevice origin;
  FrameworkVersions frameworks;
  // The model's modules (OperationTracker(model=...)), copied as they are.
  std::vector<Module> modules;
  std::string source = "habitat-agent";
  // The tracked region, on the records' clock.
  int64_t window_start_ns = 0;
  int64_t window_end_ns = 0;
  // When > 0, iteration_wall_ns: the iteration timed without tracking
  // (recording slows the host, so the window overstates the wall time).
  // The window's length is kept in metadata "agent.tracked_wall_ns".
  int64_t iteration_wall_override_ns = 0;
  // Keyed by the OpEvent id of a top-level forward op: set as the
  // rerun_time_ns of the Operation it becomes (backward only when that has
  // a backward pass). Other ids are counted in metadata
  // "agent.rerun_unmatched"; negative times are INVALID_ARGUMENT.
  std::map<uint64_t, RerunTime> rerun_times;
  // Keyed as rerun_times: each pass's non-zero times become its
  // batch_reruns, by increasing batch. Unmatched ids are counted in
  // "agent.batch_rerun_unmatched"; a batch of 0, one given twice for an op
  // or a negative time is INVALID_ARGUMENT.
  std::map<uint64_t, std::vector<BatchRerunTime>> batch_reruns;
  // The math settings in force when tracking started, copied to the trace.
  std::optional<MathSettings> math;
  // The memory the tracked iteration used, copied to the trace; its
  // `passes` are then filled from the top-level op events' allocator
  // readings (OpEvent::allocated_bytes_*), in start order.
  std::optional<MemoryUsage> memory;
};

// INVALID_ARGUMENT (naming the op event or record) for inconsistent input;
// FAILED_PRECONDITION when the window holds no GPU work at all.
// `activities` is taken by value: launches are resolved in place.
Status AssembleTrace(const std::vector<OpEvent>& ops, ActivityRecords activities,
                     const AssemblyOptions& options, Trace* out);

// Length of the union of [start, end) intervals.
int64_t UnionLength(std::vector<std::pair<int64_t, int64_t>> intervals);

// GPU-busy time of consecutive windows [boundaries[i], boundaries[i+1]):
// the union of the kernel and memory intervals that start in each window.
// For timing many iterations in one tracked region, each ended by a device
// synchronisation and a boundary taken after it, so an activity never spans
// two windows. Returns boundaries.size() - 1 values (none for fewer than 2
// boundaries); INVALID_ARGUMENT when the boundaries are not increasing.
Status BusyPerWindow(const ActivityRecords& activities, const std::vector<int64_t>& boundaries,
                     std::vector<int64_t>* busy_ns);

}  // namespace agent
}  // namespace habitat
