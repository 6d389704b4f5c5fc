// Records operator ranges through at::RecordFunction global callbacks (no
// monkey-patching): ATen ops and autograd nodes on every thread, with their
// inputs (shapes, dtypes, scalars), sequence numbers and nesting. While an
// op runs its id is pushed to the KernelSource as the external correlation
// id, so the GPU work it launches can be joined back to it.
//
// The callbacks are registered once per process and enabled only while a
// recorder is started; one recorder records at a time. Callbacks never
// throw: failures are counted and reported by Stop().
#pragma once

#include <c10/core/DeviceType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/capture/kernel_source.h"
#include "agent/capture/records.h"
#include "agent/capture/status.h"

namespace habitat {
namespace agent {

struct RecorderState;  // shared with in-flight callbacks

class OpRecorder {
 public:
  struct Options {
    // Box and convert every op's inputs (shapes, dtypes, scalars). Costs
    // host time per op, like torch.profiler's record_shapes.
    bool record_inputs = true;
    // Lists longer than this are recorded as one `none` argument (e.g. the
    // optimizer's _foreach_* lists of every parameter).
    size_t max_list_elements = 64;
    // At most this many arguments per op (the server's limit is 256).
    size_t max_arguments = 256;
    // The device whose torch.autocast state is noted per top-level op.
    c10::DeviceType autocast_device = c10::DeviceType::CUDA;
    // The CUDA device whose caching allocator is read around each
    // top-level range (OpEvent::allocated_bytes_*); -1: none.
    int memory_device = -1;
  };

  // Top-level forward ops of the last region that started with autocast
  // enabled, and the dtype it cast to ("BFloat16", "Half"; the last seen).
  // A TLS read per op, so a step that enters torch.autocast itself is
  // seen even when the tracker was told precision "fp32".
  struct AutocastSeen {
    uint64_t ops = 0;
    std::string dtype;
  };

  // `source` must outlive every op that runs while recording.
  OpRecorder(std::shared_ptr<KernelSource> source, Options options);
  ~OpRecorder();

  OpRecorder(const OpRecorder&) = delete;
  OpRecorder& operator=(const OpRecorder&) = delete;

  // The CUDA device whose allocator the next Start() reads (-1: none).
  void SetMemoryDevice(int device);

  Status Start();
  // Stops recording and moves the completed op events out (in completion
  // order). Errors seen in callbacks (a failed external-id push, an input
  // that could not be converted) come back as one status; the events are
  // still returned.
  Status Stop(std::vector<OpEvent>* out);

  // Whether any recorder in this process is recording now (work run then,
  // e.g. per-op re-runs, would be recorded into its region).
  static bool AnyRecording();

  // Of the last region (valid after Stop).
  AutocastSeen autocast_seen() const;

 private:
  std::shared_ptr<RecorderState> state_;
  bool started_ = false;
};

}  // namespace agent
}  // namespace habitat
