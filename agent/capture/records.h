// What the agent collects while it tracks an iteration, before assembly:
// operator events from the framework (agent/torch) and GPU activity records
// from a KernelSource (agent/cupti, or a fake in tests). All times are
// integer nanoseconds on the KernelSource's clock (KernelSource::NowNs), so
// CPU and GPU times can be compared directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/capture/trace_model.h"

namespace habitat {
namespace agent {

// One RecordFunction range: an ATen op, an autograd node or an engine range.
struct OpEvent {
  // Unique, > 0; pushed as the external correlation id while the op runs,
  // so the GPU work its launches cause carries it.
  uint64_t id = 0;
  // The innermost recorded op enclosing this one on the same thread; 0 for
  // a top-level op.
  uint64_t parent_id = 0;
  std::string name;
  // at::RecordFunction::currentThreadId() of the recording thread.
  uint64_t thread_id = 0;
  // Autograd nodes: the thread that ran the forward op which created the
  // node (sequence numbers are per thread). 0 when unknown.
  uint64_t forward_thread_id = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // Autograd sequence number; -1 when none (no grad, or not autograd).
  int64_t sequence_number = -1;
  // An autograd node's own range (RecordScope::BACKWARD_FUNCTION).
  bool is_backward = false;
  std::vector<Argument> arguments;
  // Per entry of `arguments`: a tensor that required grad when the op was
  // called. Not in the trace; the agent's per-op re-runs use it to compute
  // the gradients the iteration computed. Empty when inputs were not recorded.
  std::vector<bool> requires_grad;
  // The caching allocator's allocated bytes on the tracked device when the
  // range began and ended, and its peak since the region began as it ended;
  // -1 when not read (nested ranges, a process without CUDA).
  int64_t allocated_bytes_before = -1;
  int64_t allocated_bytes_after = -1;
  int64_t peak_allocated_bytes_after = -1;
};

// One kernel launch as CUPTI reports it (CuptiKernelRecord, cupti_records.h).
struct KernelRecord {
  std::string name;
  Dim3 grid;
  Dim3 block;
  uint32_t registers_per_thread = 0;
  uint32_t static_shared_memory_bytes = 0;
  uint32_t dynamic_shared_memory_bytes = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t correlation_id = 0;
  // Filled by ResolveLaunches: the external id active at launch (0: none)
  // and the CPU start of the launching API call.
  uint64_t external_id = 0;
  int64_t launch_ns = 0;
  bool has_launch_time = false;
  uint32_t device_id = 0;
  uint32_t stream_id = 0;
};

// A memcpy or memset on the device.
struct MemoryRecord {
  MemoryKind kind = MemoryKind::kUnspecified;
  uint64_t bytes = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t correlation_id = 0;
  uint64_t external_id = 0;
  int64_t launch_ns = 0;
  bool has_launch_time = false;
  uint32_t device_id = 0;
  uint32_t stream_id = 0;
};

// A CUDA runtime or driver API call (the host side of a launch or a sync).
struct ApiRecord {
  std::string name;  // e.g. "cudaLaunchKernel", "cuLaunchKernelEx"
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t correlation_id = 0;
  uint32_t thread_id = 0;
};

// CUPTI's link from an API call (correlation id) to the external id that
// was on top of the stack when the call was made.
struct ExternalCorrelation {
  uint32_t correlation_id = 0;
  uint64_t external_id = 0;
};

struct ActivityRecords {
  std::vector<KernelRecord> kernels;
  std::vector<MemoryRecord> memory;
  std::vector<ApiRecord> api_calls;
  std::vector<ExternalCorrelation> external_correlations;
  // Records CUPTI had to drop (buffers full); the trace is then incomplete.
  uint64_t dropped_records = 0;
};

// Fills external_id and launch_ns/has_launch_time of every kernel and memory
// record from the API and external-correlation records with the same
// correlation id. A correlation id with several API records (a runtime call
// and the driver call inside it) takes the earliest start.
void ResolveLaunches(ActivityRecords* records);

}  // namespace agent
}  // namespace habitat
