// Typed, validated view of the events of a torch.profiler (Kineto) Chrome
// trace. This is the boundary where untrusted JSON becomes C++ values: every
// field the importer uses is type- and range-checked here, and an error names
// the event (index in traceEvents, name) and the field.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/time_units.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace kineto {

enum class EventKind {
  kCpuOp,           // "cpu_op": an ATen operator or autograd node
  kUserAnnotation,  // "user_annotation": record_function, ProfilerStep#N
  kRuntime,         // "cuda_runtime" / "cuda_driver": host API calls
  kKernel,          // "kernel"
  kMemcpy,          // "gpu_memcpy"
  kMemset,          // "gpu_memset"
};

// An event on a CPU thread (operator, annotation or CUDA API call).
struct HostEvent {
  size_t index = 0;  // position in traceEvents, for error messages
  EventKind kind = EventKind::kCpuOp;
  std::string name;
  std::string thread;  // "pid/tid"; tids are per process
  Nanoseconds start = 0;
  Nanoseconds duration = 0;
  int64_t external_id = -1;
  int64_t correlation = -1;      // runtime/driver calls only
  int64_t sequence_number = -1;  // autograd sequence number, cpu_op only

  Nanoseconds end() const { return start + duration; }
};

// A GPU activity: kernel, memcpy or memset.
struct DeviceEvent {
  size_t index = 0;
  EventKind kind = EventKind::kKernel;
  std::string name;
  Nanoseconds start = 0;
  Nanoseconds duration = 0;
  int64_t correlation = -1;
  int64_t external_id = -1;
  int64_t device = -1;
  uint32_t stream = 0;
  // Kernels only.
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t registers_per_thread = 0;
  // Kineto reports static + dynamic shared memory as one number
  // ("shared memory"); `shared_memory_split` tells whether the trace had
  // them separately.
  uint32_t static_shared_memory = 0;
  uint32_t dynamic_shared_memory = 0;
  bool shared_memory_split = false;
  // Memcpy/memset only.
  uint64_t bytes = 0;

  Nanoseconds end() const { return start + duration; }
};

// A "[memory]" instant event, which a profile taken with
// profile_memory=True has for every allocation and free: the caching
// allocator's totals on one device right after it.
struct MemoryEvent {
  size_t index = 0;
  Nanoseconds time = 0;
  int64_t device_type = -1;  // c10::DeviceType: 0 CPU, 1 CUDA
  int64_t device_id = -1;
  // -1 when the event lacks them (older torch).
  int64_t total_allocated = -1;
  int64_t total_reserved = -1;
  // Allocated (> 0) or freed (< 0) by this event; unset when absent.
  std::optional<int64_t> bytes;
};

// c10::DeviceType::CUDA, the "Device Type" of GPU memory events.
inline constexpr int64_t kCudaDeviceType = 1;

struct ParsedTrace {
  // The whole document: top-level keys (deviceProperties, versions) and the
  // raw events, whose "args" the argument converter reads later.
  nlohmann::json document;
  std::vector<HostEvent> host;
  std::vector<DeviceEvent> device;
  std::vector<MemoryEvent> memory;

  const nlohmann::json& RawEvent(size_t index) const {
    return document.at("traceEvents").at(index);
  }
};

// Deepest JSON nesting accepted. Kineto traces nest about 5 levels; the
// limit keeps hostile input from exhausting the stack anywhere downstream.
inline constexpr int kMaxJsonDepth = 64;

// Parses and validates. INVALID_ARGUMENT on anything malformed.
absl::StatusOr<std::unique_ptr<ParsedTrace>> ParseKinetoTrace(absl::string_view json_text);

// Helpers shared with the argument converter: a description of an event
// for messages, e.g. `traceEvents[12] "aten::conv2d"`.
std::string DescribeEvent(size_t index, const nlohmann::json& event);

}  // namespace kineto
}  // namespace habitat
