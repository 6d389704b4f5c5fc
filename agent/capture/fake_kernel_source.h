// A KernelSource for tests: records what the recorder pushes and hands back
// kernels the test scripted, attributed like CUPTI would (an external
// correlation record for each API call made while an id was pushed).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "agent/capture/kernel_source.h"

namespace habitat {
namespace agent {

class FakeKernelSource : public KernelSource {
 public:
  Status Start() override {
    if (started_) return FailedPreconditionError("fake source already started");
    started_ = true;
    return Status::Ok();
  }
  Status Flush() override {
    if (!started_) return FailedPreconditionError("fake source not started");
    return Status::Ok();
  }
  Status Stop(ActivityRecords* out) override {
    if (!started_) return FailedPreconditionError("fake source not started");
    started_ = false;
    records_.dropped_records = dropped_;
    *out = std::move(records_);
    records_ = ActivityRecords();
    return Status::Ok();
  }
  Status PushExternalId(uint64_t id) override {
    stack_.push_back(id);
    ++pushes_;
    return Status::Ok();
  }
  Status PopExternalId() override {
    if (stack_.empty()) return InternalError("pop on an empty external-id stack");
    stack_.pop_back();
    return Status::Ok();
  }
  int64_t NowNs() const override { return now_ns_; }
  uint64_t dropped_records() const override { return dropped_; }
  std::vector<Status> TakeErrors() override { return std::move(errors_); }

  // Test controls.
  void set_now_ns(int64_t t) { now_ns_ = t; }
  void set_dropped(uint64_t n) { dropped_ = n; }
  void AddError(Status s) { errors_.push_back(std::move(s)); }
  uint64_t pushes() const { return pushes_; }
  size_t stack_depth() const { return stack_.size(); }

  // A kernel launched now by an API call that started at `launch_ns`: the
  // API record and, if an external id is pushed, its correlation record.
  void LaunchKernel(KernelRecord k, int64_t launch_ns, std::string api = "cudaLaunchKernel") {
    k.correlation_id = NextApiCall(std::move(api), launch_ns);
    records_.kernels.push_back(std::move(k));
  }
  void LaunchMemory(MemoryRecord m, int64_t launch_ns, std::string api) {
    m.correlation_id = NextApiCall(std::move(api), launch_ns);
    records_.memory.push_back(std::move(m));
  }
  // An API call with no GPU work (e.g. a synchronisation).
  void CallApi(std::string api, int64_t start_ns, int64_t end_ns) {
    NextApiCall(std::move(api), start_ns);
    records_.api_calls.back().end_ns = end_ns;
  }

 private:
  uint32_t NextApiCall(std::string api, int64_t start_ns) {
    const uint32_t correlation = ++last_correlation_;
    records_.api_calls.push_back(
        ApiRecord{std::move(api), start_ns, start_ns + 1000, correlation, 1});
    if (!stack_.empty()) {
      records_.external_correlations.push_back(ExternalCorrelation{correlation, stack_.back()});
    }
    return correlation;
  }

  bool started_ = false;
  int64_t now_ns_ = 0;
  uint64_t dropped_ = 0;
  uint64_t pushes_ = 0;
  uint32_t last_correlation_ = 0;
  std::vector<uint64_t> stack_;
  std::vector<Status> errors_;
  ActivityRecords records_;
};

}  // namespace agent
}  // namespace habitat
