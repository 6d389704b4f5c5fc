// One tracked region: starts the kernel source and the op recorder, stops
// them, and assembles and serialises the trace. The Python front end
// (agent/python/habitat) drives it; it synchronises the device around the
// region so that all of the region's GPU work is in the records.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/core/kernel_source.h"
#include "agent/core/records.h"
#include "agent/core/status.h"
#include "agent/core/trace_assembler.h"
#include "agent/core/trace_model.h"
#include "agent/torch/op_recorder.h"

namespace habitat {
namespace agent {

class Tracker {
 public:
  Tracker(std::shared_ptr<KernelSource> source, OpRecorder::Options options);

  Status Start();
  // Ends the region. Non-fatal problems (callback errors, dropped records)
  // are returned in `warnings`; an error status means nothing was captured.
  Status Stop(std::vector<std::string>* warnings);

  // Builds the trace of the last region; the window and everything else
  // but the descriptive fields of `options` come from the capture.
  Status Assemble(AssemblyOptions options, Trace* out) const;

  const std::vector<OpEvent>& ops() const { return ops_; }
  const ActivityRecords& activities() const { return activities_; }
  int64_t window_start_ns() const { return window_start_ns_; }
  int64_t window_end_ns() const { return window_end_ns_; }

 private:
  std::shared_ptr<KernelSource> source_;
  OpRecorder recorder_;
  bool running_ = false;
  bool captured_ = false;
  int64_t window_start_ns_ = 0;
  int64_t window_end_ns_ = 0;
  std::vector<OpEvent> ops_;
  ActivityRecords activities_;
};

}  // namespace agent
}  // namespace habitat
