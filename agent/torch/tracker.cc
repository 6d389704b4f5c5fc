#include "agent/torch/tracker.h"

#include <utility>

namespace habitat {
namespace agent {

Tracker::Tracker(std::shared_ptr<KernelSource> source, OpRecorder::Options options)
    : source_(source), recorder_(source, options) {}

Status Tracker::Start() {
  if (running_) return FailedPreconditionError("tracker already running");
  HABITAT_AGENT_RETURN_IF_ERROR(source_->Start());
  const Status recording = recorder_.Start();
  if (!recording.ok()) {
    ActivityRecords discarded;
    (void)source_->Stop(&discarded);
    return recording;
  }
  // After both are running, so their start-up cost is not in the window.
  window_start_ns_ = source_->NowNs();
  running_ = true;
  captured_ = false;
  return Status::Ok();
}

Status Tracker::Stop(std::vector<std::string>* warnings) {
  if (!running_) return FailedPreconditionError("tracker not running");
  window_end_ns_ = source_->NowNs();
  running_ = false;
  const Status recorded = recorder_.Stop(&ops_);
  if (!recorded.ok()) warnings->push_back(recorded.ToString());
  const Status stopped = source_->Stop(&activities_);
  for (const Status& s : source_->TakeErrors()) {
    warnings->push_back(s.ToString());
  }
  if (!stopped.ok()) return stopped;
  if (activities_.dropped_records > 0) {
    warnings->push_back(std::to_string(activities_.dropped_records) +
                        " GPU activity records were dropped; the trace "
                        "misses some kernels");
  }
  captured_ = true;
  return Status::Ok();
}

Status Tracker::Assemble(AssemblyOptions options, Trace* out) const {
  if (running_) return FailedPreconditionError("tracker still running");
  if (!captured_) return FailedPreconditionError("nothing was tracked yet");
  options.window_start_ns = window_start_ns_;
  options.window_end_ns = window_end_ns_;
  HABITAT_AGENT_RETURN_IF_ERROR(AssembleTrace(ops_, activities_, options, out));
  out->metadata["agent.autocast_ops"] = std::to_string(recorder_.autocast_seen().ops);
  if (!counters_.empty()) {
    const size_t n = AttachCounters(counters_, out);
    out->metadata["agent.kernels_with_counters"] = std::to_string(n);
  }
  return Status::Ok();
}

Status Tracker::CollectCounters(CounterSource* source, const std::function<Status()>& work,
                                double fraction, CounterReport* report) {
  if (running_) return FailedPreconditionError("tracker still running");
  if (!captured_) {
    return FailedPreconditionError(
        "nothing was tracked yet: counters are collected for the kernels of "
        "a tracked iteration");
  }
  return CollectKernelCounters(activities_.kernels, fraction, source, work, &counters_, report);
}

}  // namespace agent
}  // namespace habitat
