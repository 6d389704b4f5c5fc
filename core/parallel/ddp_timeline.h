// Step time of PyTorch DistributedDataParallel (DDP) over NCCL on N GPUs,
// from the single-GPU iteration predicted for the target GPU
// (docs/multi_gpu.md, section 2, steps 2, 5, 6 and 7).
//
// Weak scaling: the per-GPU batch is fixed, so every rank runs the
// single-GPU forward and backward, and gradient buckets are all-reduced on
// one NCCL stream while the backward pass goes on. Times are integer ns from
// the start of the step (the forward starts at 0, the backward at
// forward_ns).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/parallel/allreduce.h"

namespace habitat {

// DDP's default bucket_cap_mb = 25, in bytes (MiB, as DDP computes it).
inline constexpr int64_t kDefaultBucketCapBytes = 26'214'400;

// Slowdown of compute kernels while an all-reduce runs beside them, measured
// on H100 with a concurrent 256 MiB all-reduce: GEMM 1.11-1.19, 1 GiB copies
// 1.16-1.17, per rank, N = 2 and 4 (eval/multi_gpu/results, `interference`).
// Not the default: it is one GPU class under a saturating all-reduce.
inline constexpr double kH100ComputeSlowdownUnderAllReduce = 1.15;

struct ParamGradient {
  int64_t bytes = 0;
  // Index into SingleGpuIteration::backward_op_ns of the operation after
  // which this gradient is ready.
  int ready_after_op = 0;
};

struct SingleGpuIteration {
  int64_t forward_ns = 0;
  // Predicted durations of the backward operations, in execution order.
  std::vector<int64_t> backward_op_ns;
  // Indexed like backward_op_ns: the forward time of the operation whose
  // backward pass backward_op_ns[j] is, with the operations without a
  // backward pass that follow it in the forward. Part of forward_ns (which
  // also holds kernels no operation claimed); empty when not read. DDP does
  // not use it; the FSDP timeline splits the forward by it.
  std::vector<int64_t> forward_op_ns;
  // What the host alone takes for the iteration (HostOnlyNs), and of it
  // the optimizer step's launches (its operations' CPU span); 0 when not
  // known. DDP does not use them; the FSDP timeline lets the host gate work.
  int64_t host_ns = 0;
  int64_t optimizer_host_ns = 0;
  // Parameters with gradients. Gradient-ready order is by ready_after_op;
  // gradients of one operation keep this vector's order, so pass them in
  // the order the trace saw them become ready.
  std::vector<ParamGradient> params;
  int64_t optimizer_ns = 0;
  // Module buffers (BatchNorm running statistics), which DDP broadcasts
  // from rank 0 before each forward (broadcast_buffers=True, its default).
  int buffers = 0;
  int64_t buffer_bytes = 0;
};

// forward + sum of backward + optimizer.
int64_t SingleGpuStepNs(const SingleGpuIteration& iteration);

struct DdpConfig {
  int ranks_per_node = 1;
  int nodes = 1;
  LinkConstants link;
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kBest;
  int64_t bucket_cap_bytes = kDefaultBucketCapBytes;
  // Backward operations take this many times longer while a bucket is being
  // reduced (>= 1). 1.0 by default: the measured factor
  // (kH100ComputeSlowdownUnderAllReduce) is of one GPU class only.
  double compute_slowdown = 1.0;
  // Host time between a bucket's last gradient and its all-reduce launch
  // (autograd hooks, bucket bookkeeping, the torch.distributed call; a lone
  // call measured 24-35 us on an H100 host). Delays the bucket's start.
  int64_t per_bucket_host_ns = 0;
  // Memory bandwidth of the target, GB/s, for DDP's gradient copies (2 x
  // gradient bytes each: read and write): each gradient into its bucket as
  // it becomes ready, on the compute stream, and each reduced bucket back
  // into .grad before the optimizer. 0 omits the copies: they do not exist
  // with gradient_as_bucket_view=True, and their bytes take ~0.06 ms each
  // way for ResNet-50 on an H100.
  double copy_back_memory_gbps = 0;
  // GPU time of one of those copies apart from its bytes: one small kernel
  // per gradient each way (161 parameters, 322 kernels for ResNet-50), which
  // at 1.2-1.8 us each outweigh the bytes. 0 omits it.
  int64_t per_copy_kernel_ns = 0;
  // DDP's broadcast_buffers: the buffers go out from rank 0 in one
  // coalesced broadcast before the forward, and each is copied back out of
  // it (one small kernel per buffer, per_copy_kernel_ns).
  bool broadcast_buffers = true;
};

// A bucket of gradients, closed when its bytes reach the cap (so it may
// overshoot by one tensor), filled in gradient-ready order.
struct Bucket {
  std::vector<int> params;  // indices into SingleGpuIteration::params
  int64_t bytes = 0;
  int last_ready_op = 0;  // the op after which every gradient is ready
};

// The buckets DDP rebuilds after its first iteration. InvalidArgument for a
// cap <= 0, negative bytes, or a ready_after_op outside [0, num_backward_ops).
absl::StatusOr<std::vector<Bucket>> AssignBuckets(const std::vector<ParamGradient>& params,
                                                  int num_backward_ops, int64_t bucket_cap_bytes);

struct BucketTiming {
  int64_t bytes = 0;
  int64_t ready_ns = 0;      // last gradient ready + per-bucket host time
  int64_t start_ns = 0;      // max(ready, previous bucket's end)
  int64_t end_ns = 0;        // start + all-reduce time
  int64_t allreduce_ns = 0;  // the all-reduce alone
};

struct DdpStepPrediction {
  int64_t step_ns = 0;
  int64_t single_gpu_step_ns = 0;
  // step - single-GPU step: communication not hidden by the backward pass,
  // plus what overlap, host time and the copy-back add.
  int64_t exposed_comm_ns = 0;
  int64_t backward_end_ns = 0;      // with interference and the copies into buckets
  int64_t copy_in_ns = 0;           // the copies into buckets, uninterfered
  int64_t buffer_broadcast_ns = 0;  // before the forward
  int64_t copy_back_ns = 0;
  int num_buckets = 0;
  std::vector<BucketTiming> buckets;
  // single-GPU step / step (weak scaling; 1.0 is perfect).
  double scaling_efficiency = 1.0;
};

// step = buffer broadcast + max(backward end, last all-reduce end) +
// copy-back + optimizer, the backward lengthened by the copies into buckets.
// InvalidArgument for negative times or bytes, and for a single-GPU step of
// more than 1e15 ns or more than 1e15 gradient and buffer bytes.
// With one GPU in all it is the single-GPU step exactly, with no buckets.
absl::StatusOr<DdpStepPrediction> PredictDdpStep(const SingleGpuIteration& iteration,
                                                 const DdpConfig& config);

}  // namespace habitat
