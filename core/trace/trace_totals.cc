#include "core/trace/trace_totals.h"

namespace habitat {

int64_t SumOfPassTimes(const habitat::v1::Trace& trace) {
  int64_t total = 0;
  for (const auto& op : trace.operations()) {
    total += op.forward().time_ns() + op.backward().time_ns();
  }
  for (const auto& k : trace.unattributed_kernels()) total += k.duration_ns();
  return total;
}

}  // namespace habitat
