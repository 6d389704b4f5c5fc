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
  // The single-GPU iteration's host time alone, and the optimizer's part of
  // it (SingleGpuIteration's); 0 when not known, and then the host gates
  // nothing.
  int64_t host_ns = 0;
  int64_t optimizer_host_ns = 0;
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

// The same, with units of about `unit_bytes` each in forward order (a
// wrapping policy's modules; scaled to the gradients' bytes where those
// differ in total): a unit ends at the first layer end at or past its
// share. InvalidArgument as above, or for a negative or all-zero
// unit_bytes.
absl::StatusOr<FsdpIteration> FsdpUnitsAtBytes(const SingleGpuIteration& iteration,
                                               const std::vector<int64_t>& unit_bytes);

// FSDP2's root unit (fully_shard on the model last) holds the parameters
// outside every wrapped module, before the first (embeddings) and after the
// last (a final norm): the last unit folded into the first, gathered first.
// Fewer than three units stay as they are.
void FoldLastUnitIntoFirst(FsdpIteration* iteration);

// Compute kernels run this many times slower while one of FSDP's
// collectives runs beside them (NCCL's kernels take SMs and memory
// bandwidth): on 2 x H200 (NVLink), FSDP2 fp32 steps of four transformers
// slowed the kernels they share with the single-GPU step by 0.20-0.32 of
// the collective time they overlapped (docs/multi_gpu.md, section 6,
// "Measured on 2 x H200"). Of the same order as DDP's H100 figure.
inline constexpr double kFsdpComputeSlowdownUnderCollectives = 1.25;

// Host time FSDP2 adds per unit and step (its pre/post forward and
// backward hooks, DTensor bookkeeping, the copy-in/out launches), measured
// on one H200 host with PyTorch 2.11 (docs/multi_gpu.md, section 6).
inline constexpr int64_t kFsdpHostNsPerUnit = 2'800'000;

struct FsdpConfig {
  int ranks_per_node = 1;
  int nodes = 1;
  LinkConstants link;
  // Sustained memory bandwidth of the target, GB/s, for FSDP2's copies on
  // the GPU: each gather's copy-in (the shard into the flat buffer, 2 x
  // bytes / N read and written) and copy-out (the flat buffer into the
  // parameters, 2 x bytes), twice a step, and the reduce-scatter's copy-in
  // of the gradients (2 x bytes): (6 + 4 / N) x the unit's bytes. 0 omits
  // them.
  double copy_memory_gbps = 0;
  // Compute overlapped by a collective takes this many times longer for
  // the overlap (>= 1; kFsdpComputeSlowdownUnderCollectives measured).
  double compute_slowdown = 1.0;
  // FSDP2's own host work per unit (kFsdpHostNsPerUnit), half before the
  // unit's forward and half before its backward; counted only where the
  // iteration's host time is known.
  int64_t host_ns_per_unit = 0;
};

struct FsdpStepPrediction {
  int64_t step_ns = 0;
  // forward + backward + optimizer / N + FSDP2's copies + interference:
  // what the step would take with all communication hidden.
  int64_t compute_ns = 0;
  // step - compute: communication the compute does not hide.
  int64_t exposed_comm_ns = 0;
  int64_t forward_end_ns = 0;
  int64_t backward_end_ns = 0;  // compute and the last reduce-scatter done
  int64_t sharded_optimizer_ns = 0;
  // All collectives of the step, each in full (hidden or not).
  int64_t all_gather_ns = 0;
  int64_t reduce_scatter_ns = 0;
  // FSDP2's copies on the GPU and what the collectives slowed compute by;
  // both in compute_ns.
  int64_t copy_ns = 0;
  int64_t interference_ns = 0;
  // How long the GPU waited for the host (FSDP2's hooks and the launches)
  // where the host's time is known: over kHostBoundIdleShare of the step,
  // the host sets its pace.
  int64_t host_wait_ns = 0;
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
// Each unit's forward carries its gather's copies, its backward those of
// the second gather and of the reduce-scatter; a unit's compute is
// stretched by (compute_slowdown - 1) x the time collectives ran beside it.
// Where the iteration's host time is known the host runs beside the GPU:
// it issues each unit's work after FSDP2's hook (host_ns_per_unit / 2) and
// the unit's share of the host time before the optimizer (in proportion to
// the unit's GPU time), then the optimizer's; a unit's compute starts no
// earlier than its hook is done and ends no earlier than its last launch,
// the optimizer's kernels start once the host begins launching them, and
// the step ends no earlier than the host.
// With one GPU in all there is no communication and no in-flight copy.
// InvalidArgument for negative times or bytes or a bad configuration.
absl::StatusOr<FsdpStepPrediction> PredictFsdpStep(const FsdpIteration& iteration,
                                                   const FsdpConfig& config);

}  // namespace habitat
