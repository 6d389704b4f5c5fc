#include "core/kineto/kineto_memory.h"

#include <algorithm>
#include <utility>

namespace habitat {
namespace kineto {
namespace {

// The window's memory events of the caching allocator on `device` (every
// GPU's with device -1), in time order.
std::vector<const MemoryEvent*> MemoryEventsInWindow(const ParsedTrace& trace,
                                                     const MemoryWindow& window, int64_t device) {
  std::vector<const MemoryEvent*> events;
  for (const MemoryEvent& m : trace.memory) {
    if (m.device_type != kCudaDeviceType || m.time < window.start || m.time > window.end) continue;
    if (device >= 0 && m.device_id != device) continue;
    events.push_back(&m);
  }
  std::sort(events.begin(), events.end(), [](const auto* a, const auto* b) {
    return std::pair(a->time, a->index) < std::pair(b->time, b->index);
  });
  return events;
}

}  // namespace

std::optional<habitat::v1::MemoryUsage> MemoryInWindow(const ParsedTrace& trace,
                                                       const MemoryWindow& window, int64_t device) {
  const std::vector<const MemoryEvent*> events = MemoryEventsInWindow(trace, window, device);
  int64_t allocated = -1, reserved = -1;
  for (const MemoryEvent* m : events) {
    allocated = std::max(allocated, m->total_allocated);
    reserved = std::max(reserved, m->total_reserved);
  }
  if (allocated < 0 && reserved < 0) return std::nullopt;
  const MemoryEvent* first = events.front();
  habitat::v1::MemoryUsage out;
  if (first->total_allocated >= 0 && first->bytes.has_value() &&
      first->total_allocated - *first->bytes >= 0) {
    out.set_allocated_bytes_at_start(first->total_allocated - *first->bytes);
    // A first event that frees leaves less than the window began with: the
    // peak counts the start (as AddPassMemory's running peak does).
    allocated = std::max(allocated, out.allocated_bytes_at_start());
  }
  if (allocated >= 0) out.set_peak_allocated_bytes(allocated);
  if (reserved >= 0) out.set_peak_reserved_bytes(reserved);
  out.set_source("kineto");
  return out;
}

void AddPassMemory(const ParsedTrace& trace, const MemoryWindow& window, int64_t device,
                   const std::vector<PassSpan>& spans, habitat::v1::MemoryUsage* memory) {
  if (!memory->has_allocated_bytes_at_start()) return;
  std::vector<const MemoryEvent*> events = MemoryEventsInWindow(trace, window, device);
  events.erase(std::remove_if(events.begin(), events.end(),
                              [](const auto* m) { return m->total_allocated < 0; }),
               events.end());
  const int64_t start = memory->allocated_bytes_at_start();
  std::vector<int64_t> running_peak(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    running_peak[i] = std::max(i == 0 ? start : running_peak[i - 1], events[i]->total_allocated);
  }
  // The number of events before `t` (at or before it when `inclusive`).
  auto count_before = [&](Nanoseconds t, bool inclusive) {
    auto it = inclusive
                  ? std::upper_bound(events.begin(), events.end(), t,
                                     [](Nanoseconds v, const auto* m) { return v < m->time; })
                  : std::lower_bound(events.begin(), events.end(), t,
                                     [](const auto* m, Nanoseconds v) { return m->time < v; });
    return static_cast<size_t>(it - events.begin());
  };
  auto total_after = [&](size_t count) {
    return count == 0 ? start : events[count - 1]->total_allocated;
  };
  for (const PassSpan& span : spans) {
    const size_t before = count_before(span.start, false);
    const size_t after = count_before(span.end, true);
    habitat::v1::PassMemory* m = memory->add_passes();
    m->set_operation(span.operation);
    m->set_backward(span.backward);
    m->set_allocated_bytes_before(total_after(before));
    m->set_allocated_bytes_after(total_after(after));
    m->set_peak_allocated_bytes_after(after == 0 ? start : running_peak[after - 1]);
  }
}

}  // namespace kineto
}  // namespace habitat
