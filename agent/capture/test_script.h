// Test helper: plays the part of the op recorder (agent/torch) against a
// FakeKernelSource, so tests can write an iteration as nested ops that
// launch kernels.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/capture/fake_kernel_source.h"
#include "agent/capture/records.h"

namespace habitat {
namespace agent {

class OpScript {
 public:
  explicit OpScript(FakeKernelSource* source) : source_(source) {}

  // Opens an op on `thread` at `t` and pushes its id, like the recorder.
  uint64_t Begin(std::string name, uint64_t thread, int64_t t, int64_t sequence_number = -1,
                 bool is_backward = false, uint64_t forward_thread = 0) {
    OpEvent e;
    e.id = ++last_id_;
    e.name = std::move(name);
    e.thread_id = thread;
    e.start_ns = t;
    e.sequence_number = sequence_number;
    e.is_backward = is_backward;
    e.forward_thread_id = forward_thread;
    std::vector<uint64_t>& stack = stacks_[thread];
    e.parent_id = stack.empty() ? 0 : stack.back();
    stack.push_back(e.id);
    open_[e.id] = std::move(e);
    (void)source_->PushExternalId(last_id_);
    return last_id_;
  }
  // Closes the innermost open op of `thread` at `t`.
  void End(uint64_t thread, int64_t t) {
    std::vector<uint64_t>& stack = stacks_[thread];
    OpEvent e = std::move(open_[stack.back()]);
    open_.erase(stack.back());
    stack.pop_back();
    e.end_ns = t;
    ops_.push_back(std::move(e));
    (void)source_->PopExternalId();
  }
  void SetArguments(uint64_t id, std::vector<Argument> args) {
    open_[id].arguments = std::move(args);
  }
  // The allocator readings the recorder takes around a top-level op.
  void SetMemory(uint64_t id, int64_t before, int64_t after, int64_t peak_after) {
    OpEvent& e = open_[id];
    e.allocated_bytes_before = before;
    e.allocated_bytes_after = after;
    e.peak_allocated_bytes_after = peak_after;
  }

  // A kernel running on the GPU over [start, end), launched at `launch`.
  void Kernel(const std::string& name, int64_t launch, int64_t start, int64_t end,
              uint32_t stream = 7) {
    KernelRecord k;
    k.name = name;
    k.grid = {80, 2, 1};
    k.block = {256, 1, 1};
    k.registers_per_thread = 40;
    k.static_shared_memory_bytes = 1024;
    k.dynamic_shared_memory_bytes = 4096;
    k.start_ns = start;
    k.end_ns = end;
    k.stream_id = stream;
    source_->LaunchKernel(std::move(k), launch);
  }
  void Memset(uint64_t bytes, int64_t launch, int64_t start, int64_t end) {
    MemoryRecord m;
    m.kind = MemoryKind::kMemset;
    m.bytes = bytes;
    m.start_ns = start;
    m.end_ns = end;
    m.stream_id = 7;
    source_->LaunchMemory(std::move(m), launch, "cudaMemsetAsync");
  }

  // Ops in completion order, as the recorder hands them over.
  const std::vector<OpEvent>& ops() const { return ops_; }

 private:
  FakeKernelSource* source_;
  uint64_t last_id_ = 0;
  std::map<uint64_t, std::vector<uint64_t>> stacks_;
  std::map<uint64_t, OpEvent> open_;
  std::vector<OpEvent> ops_;
};

}  // namespace agent
}  // namespace habitat
