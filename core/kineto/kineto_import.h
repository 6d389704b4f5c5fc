// Imports a torch.profiler Chrome trace (prof.export_chrome_trace, i.e. the
// Kineto JSON format) as a habitat.v1.Trace of one training iteration.
//
// Mapping (see kineto_import.cc for the details):
//  - The iteration is one "ProfilerStep#N" user annotation (default: the
//    last one in which any GPU work was launched); without annotations, the
//    whole trace. All times in the result are relative to its start.
//  - Operations are the top-level cpu_op events (not nested inside another
//    cpu_op on the same thread) that start in the iteration, in start order.
//  - Backward passes are the autograd engine's top-level
//    "autograd::engine::evaluate_function: XxxBackward0" events. Each is
//    linked to the forward operation whose subtree recorded the node's
//    autograd sequence number (the last such operation: sequence numbers are
//    peeked before the node is created, so earlier ops may share it). Nodes
//    linked to the same forward are merged into one backward Pass, named
//    after the node with the most kernel time. Unlinked nodes
//    (AccumulateGrad, ...) become operations of their own with the node name,
//    an empty forward and the work in `backward`.
//  - A kernel/memcpy/memset belongs to the iteration when its launch (the
//    cuda_runtime/cuda_driver event with the same "correlation") starts in
//    it, and to the top-level cpu_op on the launching thread whose time
//    range contains the launch; "External id" is the fallback when there is
//    no launch event or no enclosing op. The rest go to
//    unattributed_kernels (memory activities are only counted in metadata).
//  - Pass.time_ns is the sum of its kernel and memory-activity durations.
//  - Kineto reports one "shared memory" number per kernel, the sum of static
//    and dynamic shared memory. It is stored in dynamic_shared_memory_bytes
//    (static = 0): their sum, which is what occupancy depends on, stays
//    right, and most large allocations in library kernels are dynamic.
//    Traces with separate "static/dynamic shared memory" args keep them.
//  - iteration_gpu_busy_ns is the union of the iteration's kernel, memcpy
//    and memset intervals.
//  - Host timeline and iteration_wall_ns: with an override (a wall time
//    measured without the profiler) the CPU times stay as profiled and
//    iteration_wall_ns is the override. Without one, the profiler's
//    estimated host cost (core/kineto/profiler_cost.h) is taken out of every
//    CPU time (operations, launches, synchronisations), and
//    iteration_wall_ns is the corrected origin replayed as it ran
//    (core/predict/host_replay.h). Where the cost cannot be estimated the
//    times stay as profiled and iteration_wall_ns is the step annotation's
//    duration (whole trace: first to last event). Metadata says which:
//    "kineto.host_timeline" ("profiler cost removed", "profiled; wall time
//    given" or "profiled", then "kineto.host_timeline_why"), and
//    "kineto.profiled_step_ns" is the step as recorded.
//    docs/profiled_wall_time.md.
//  - `math` (source "inferred") is what the kernel names show about TF32
//    and autocast (InferMathSettings in core/trace/math_mode.h); unset when
//    they show nothing.
//  - `memory` (source "kineto"): the peaks of the "Total Allocated" and
//    "Total Reserved" that the iteration's "[memory]" events (a profile taken
//    with profile_memory=True) report for the GPU most activities ran on;
//    unset without such events. The allocation when the iteration began and
//    the device's total are left unset (origin.memory_bytes has the latter).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/time_units.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

struct KinetoImportOptions {
  std::string model_name;
  uint32_t batch_size = 0;
  habitat::v1::Precision precision = habitat::v1::PRECISION_UNSPECIFIED;
  // The iteration's wall time measured without the profiler (e.g. the
  // median of timed repetitions, which the profile cannot give): becomes
  // iteration_wall_ns, and the host timeline stays as profiled.
  std::optional<Nanoseconds> iteration_wall_ns;
  // N of the "ProfilerStep#N" to import; unset: the last one with GPU work.
  std::optional<int64_t> profiler_step;
};

// INVALID_ARGUMENT, naming the event (index, name) and field, when the JSON
// is malformed or lacks what the import needs (e.g. no kernels at all).
absl::StatusOr<habitat::v1::Trace> ImportKinetoTrace(absl::string_view json_text,
                                                     const KinetoImportOptions& options);

}  // namespace habitat
