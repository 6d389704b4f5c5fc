#include "agent/capture/summary.h"

#include <cstdio>

namespace habitat {
namespace agent {

TraceSummary Summarize(const Trace& trace) {
  TraceSummary s;
  auto add_pass = [&](const Pass& p) {
    s.kernels += static_cast<int64_t>(p.kernels.size());
    s.memory_activities += static_cast<int64_t>(p.memory.size());
    s.pass_time_ns += p.time_ns;
  };
  for (const Operation& o : trace.operations) {
    ++s.operations;
    add_pass(o.forward);
    if (o.backward.has_value()) {
      ++s.operations_with_backward;
      add_pass(*o.backward);
    }
  }
  s.unattributed_kernels = static_cast<int64_t>(trace.unattributed_kernels.size());
  s.kernels += s.unattributed_kernels;
  for (const Kernel& k : trace.unattributed_kernels) {
    s.unattributed_kernel_ns += k.duration_ns;
  }
  s.gpu_busy_ns = trace.iteration_gpu_busy_ns;
  s.wall_ns = trace.iteration_wall_ns;
  return s;
}

std::string FormatSummary(const TraceSummary& s) {
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "%lld ops (%lld with backward), %lld kernels (%lld unattributed), "
                "%lld memory activities; GPU busy %.3f ms of %.3f ms wall; per-op "
                "sum %.3f ms + unattributed %.3f ms",
                static_cast<long long>(s.operations),
                static_cast<long long>(s.operations_with_backward),
                static_cast<long long>(s.kernels), static_cast<long long>(s.unattributed_kernels),
                static_cast<long long>(s.memory_activities), s.gpu_busy_ns / 1e6, s.wall_ns / 1e6,
                s.pass_time_ns / 1e6, s.unattributed_kernel_ns / 1e6);
  return buf;
}

}  // namespace agent
}  // namespace habitat
