// A KernelSource that sees no GPU: a steady clock and nothing else. Used to
// record ops on a machine without CUDA/CUPTI (CPU tests of the recorder),
// where a trace cannot be assembled but the op events can be inspected.
#pragma once

#include <chrono>
#include <vector>

#include "agent/capture/kernel_source.h"

namespace habitat {
namespace agent {

class HostOnlySource : public KernelSource {
 public:
  Status Start() override { return Status::Ok(); }
  Status Flush() override { return Status::Ok(); }
  Status Stop(ActivityRecords* out) override {
    *out = ActivityRecords();
    return Status::Ok();
  }
  Status PushExternalId(uint64_t) override { return Status::Ok(); }
  Status PopExternalId() override { return Status::Ok(); }
  int64_t NowNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  uint64_t dropped_records() const override { return 0; }
  std::vector<Status> TakeErrors() override { return {}; }
};

}  // namespace agent
}  // namespace habitat
