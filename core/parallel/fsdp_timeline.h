// Step time of PyTorch fully sharded data parallelism (FSDP2, fully_shard)
// over NCCL on N GPUs, from the single-GPU iteration predicted for the
// target GPU (docs/multi_gpu.md, "Fully sharded data parallel").
//
// Weak scaling as for DDP: every rank runs the single-GPU forward and
// backward on its own batch. Each FSDP unit (a group of parameters that is
// gathered and reduced together) holds 1/N of its parameters; its
// parameters are all-gathered before its forward and again before its
// backward, and its gradients reduce-scattered after its backward. All
// collectives run one after another on one NCCL stream, beside the compute
// stream. Times are integer ns from the start of the step.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/parallel/allreduce.h"
#include "core/parallel/ddp_timeline.h"

namespace habitat {

// Units of about equal parameter bytes when the trace names no modules
// (FsdpUnitsByBytes): a count in the range of the transformer blocks of
// the models FSDP is used for (GPT-2 small 12, Llama 3 8B 32).
inline constexpr int kDefaultFsdpUnits = 16;

struct FsdpUnit {
  int64_t bytes = 0;        // unsharded parameter bytes (= gradient bytes)
  int64_t forward_ns = 0;   // its forward compute
  int64_t backward_ns = 0;  // its backward compute
};

struct FsdpIteration {
  // In forward order; the backward runs them last first.
  std::vector<FsdpUnit> units;
  // Forward work after the last unit that gathers nothing (the loss, and
  // kernels no operation claimed).
  int64_t tail_forward_ns = 0;
  // The whole model's optimizer step on one GPU; each rank steps its 1/N.
  int64_t optimizer_ns = 0;
};

// The default unit policy, for traces without module names: the
// parameters in forward order (the reverse of gradient-ready order), cut
// into `num_units` groups of about equal bytes, never between two
// gradients of one backward operation (a layer's weight and bias stay in
// one unit), so there may be fewer. Approximates wrapping each transformer
// block. A unit's backward is the backward operations from just after the
// previous unit's last gradient to its own last gradient (the first unit
// in backward order also takes those before any gradient, the last those
// after every gradient); its forward is those operations' forward_op_ns.
// The rest of forward_ns goes to tail_forward_ns. InvalidArgument for
// num_units < 1, no parameters, forward_op_ns not indexed like
// backward_op_ns, or a ready_after_op out of range.
absl::StatusOr<FsdpIteration> FsdpUnitsByBytes(const SingleGpuIteration& iteration, int num_units);

struct FsdpConfig {
  int ranks_per_node = 1;
  int nodes = 1;
  LinkConstants link;
};

struct FsdpStepPrediction {
  int64_t step_ns = 0;
  // forward + backward + optimizer / N: what the step would take with all
  // communication hidden.
  int64_t compute_ns = 0;
  // step - compute: communication the compute does not hide.
  int64_t exposed_comm_ns = 0;
  int64_t forward_end_ns = 0;
  int64_t backward_end_ns = 0;  // compute and the last reduce-scatter done
  int64_t sharded_optimizer_ns = 0;
  // All collectives of the step, each in full (hidden or not).
  int64_t all_gather_ns = 0;
  int64_t reduce_scatter_ns = 0;
  int num_units = 0;
  // The two largest units' unsharded bytes: at most two units are gathered
  // at once (the one computing and the one prefetched).
  int64_t unsharded_in_flight_bytes = 0;
};

// The two largest units' unsharded bytes: FSDP holds at most two units
// gathered at once (the one computing and the one prefetched).
int64_t UnshardedInFlightBytes(const FsdpIteration& iteration);

// The timeline:
//   forward: unit 0's all-gather is exposed; unit u+1's all-gather starts
//     when unit u's compute starts (prefetch one ahead, as FSDP2's implicit
//     prefetch) and the stream is free; unit u computes once gathered and
//     the previous unit is done;
//   backward: the last unit's all-gather starts when its forward is done;
//     unit v-1's when unit v's backward starts; unit v's reduce-scatter
//     when its backward is done, after what the stream already holds;
//   then every rank steps its shard of the optimizer (optimizer / N).
// With one GPU in all there is no communication and no in-flight copy.
// InvalidArgument for negative times or bytes or a bad configuration.
absl::StatusOr<FsdpStepPrediction> PredictFsdpStep(const FsdpIteration& iteration,
                                                   const FsdpConfig& config);

}  // namespace habitat
