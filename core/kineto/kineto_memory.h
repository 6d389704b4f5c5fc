// The caching allocator's memory in the imported iteration, from a Kineto
// trace's [memory] events (a profile taken with profile_memory=True).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/time_units.h"
#include "core/kineto/kineto_events.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {
namespace kineto {

// The window of the iteration, in the trace's clock, both ends included.
struct MemoryWindow {
  Nanoseconds start = 0;
  Nanoseconds end = 0;
};

// The caching allocator's peaks on `device` during the window: the maxima
// of the totals its memory events report after each allocation, and what
// was allocated when the window began: the first event's total less what
// that event allocated (nothing changes between events). Unset when the
// window has none (a profile taken without profile_memory=True). With
// device -1 (kernels without a "device" arg) every GPU's events count.
std::optional<habitat::v1::MemoryUsage> MemoryInWindow(const ParsedTrace& trace,
                                                       const MemoryWindow& window, int64_t device);

// A top-level op that became (part of) an operation's pass.
struct PassSpan {
  Nanoseconds start = 0;
  Nanoseconds end = 0;
  uint32_t operation = 0;
  bool backward = false;
};

// MemoryUsage.passes from the same events: for every pass span, in the
// order given (start order), the total allocated after the last event
// before it began and after the last one before it ended, and the running
// maximum by then. Nothing without a start to begin from.
void AddPassMemory(const ParsedTrace& trace, const MemoryWindow& window, int64_t device,
                   const std::vector<PassSpan>& spans, habitat::v1::MemoryUsage* memory);

}  // namespace kineto
}  // namespace habitat
