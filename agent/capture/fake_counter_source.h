// A CounterSource for tests: runs the work and hands back the ranges the
// test scripted, as if the profiler had measured them.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "agent/capture/counter_source.h"

namespace habitat {
namespace agent {

class FakeCounterSource : public CounterSource {
 public:
  explicit FakeCounterSource(std::vector<std::string> metric_names)
      : metric_names_(std::move(metric_names)) {}

  Status Collect(const std::function<Status()>& work, size_t max_kernels,
                 CounterPass* out) override {
    ++collections_;
    last_max_kernels_ = max_kernels;
    if (!error_.ok()) return error_;
    HABITAT_AGENT_RETURN_IF_ERROR(work());
    out->metric_names = metric_names_;
    out->ranges = ranges_;
    out->dropped_ranges = 0;
    if (out->ranges.size() > max_kernels) {
      out->dropped_ranges = out->ranges.size() - max_kernels;
      out->ranges.resize(max_kernels);
    }
    out->replay_passes = 1;
    return Status::Ok();
  }

  // Test controls.
  void AddRange(std::string kernel_name, std::vector<double> values) {
    ranges_.push_back(RangeMetrics{std::move(kernel_name), std::move(values)});
  }
  void FailWith(Status s) { error_ = std::move(s); }
  int collections() const { return collections_; }
  size_t last_max_kernels() const { return last_max_kernels_; }

 private:
  std::vector<std::string> metric_names_;
  std::vector<RangeMetrics> ranges_;
  Status error_;
  int collections_ = 0;
  size_t last_max_kernels_ = 0;
};

}  // namespace agent
}  // namespace habitat
