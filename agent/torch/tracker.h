// One tracked region: starts the kernel source and the op recorder, stops
// them, and assembles and serialises the trace. The Python front end
// (agent/python/habitat_agent) drives it; it synchronises the device around the
// region so that all of the region's GPU work is in the records.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/capture/counter_source.h"
#include "agent/capture/kernel_counters.h"
#include "agent/capture/kernel_source.h"
#include "agent/capture/records.h"
#include "agent/capture/status.h"
#include "agent/capture/trace_assembler.h"
#include "agent/capture/trace_model.h"
#include "agent/torch/op_recorder.h"

namespace habitat {
namespace agent {

class Tracker {
 public:
  Tracker(std::shared_ptr<KernelSource> source, OpRecorder::Options options);

  // The CUDA device whose caching allocator is read around each top-level
  // range of the next region (-1: none, e.g. without CUDA).
  void SetMemoryDevice(int device) { recorder_.SetMemoryDevice(device); }

  Status Start();
  // Ends the region. Non-fatal problems (callback errors, dropped records)
  // are returned in `warnings`; an error status means nothing was captured.
  Status Stop(std::vector<std::string>* warnings);

  // Builds the trace of the last region; the window and everything else
  // but the descriptive fields of `options` come from the capture. Kernels
  // with measured counters get them.
  Status Assemble(AssemblyOptions options, Trace* out) const;

  // After a region: runs `work` (one more iteration, which must launch the
  // same kernels) under `source`, for the kernels that make up `fraction`
  // of the region's kernel time and are not measured yet
  // (CollectKernelCounters). Counters are kept across regions.
  Status CollectCounters(CounterSource* source, const std::function<Status()>& work,
                         double fraction, CounterReport* report);
  const CounterCache& counters() const { return counters_; }

  const std::vector<OpEvent>& ops() const { return ops_; }
  // Whether the last region's ops ran under torch.autocast.
  OpRecorder::AutocastSeen autocast_seen() const { return recorder_.autocast_seen(); }
  const ActivityRecords& activities() const { return activities_; }
  int64_t window_start_ns() const { return window_start_ns_; }
  int64_t window_end_ns() const { return window_end_ns_; }
  // The kernel source's clock, which the activity records use.
  int64_t NowNs() const { return source_->NowNs(); }

 private:
  std::shared_ptr<KernelSource> source_;
  OpRecorder recorder_;
  bool running_ = false;
  bool captured_ = false;
  int64_t window_start_ns_ = 0;
  int64_t window_end_ns_ = 0;
  std::vector<OpEvent> ops_;
  ActivityRecords activities_;
  CounterCache counters_;
};

}  // namespace agent
}  // namespace habitat
