#include "core/parallel/ddp_timeline.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace habitat {
namespace {

constexpr double kMaxIterationTotal = 1e15;

absl::Status ValidateIteration(const SingleGpuIteration& iteration) {
  if (iteration.forward_ns < 0 || iteration.optimizer_ns < 0) {
    return absl::InvalidArgumentError("forward_ns and optimizer_ns must be >= 0");
  }
  if (iteration.buffers < 0 || iteration.buffer_bytes < 0) {
    return absl::InvalidArgumentError("buffers and buffer_bytes must be >= 0");
  }
  double step_ns = static_cast<double>(iteration.forward_ns) + iteration.optimizer_ns;
  for (size_t i = 0; i < iteration.backward_op_ns.size(); ++i) {
    if (iteration.backward_op_ns[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("backward_op_ns[", i, "] must be >= 0, got ", iteration.backward_op_ns[i]));
    }
    step_ns += static_cast<double>(iteration.backward_op_ns[i]);
  }
  double bytes = static_cast<double>(iteration.buffer_bytes);
  for (const ParamGradient& g : iteration.params) bytes += static_cast<double>(g.bytes);
  // Keeps every sum of the timeline far inside int64: no GPU runs a step of
  // 11.6 days or moves a petabyte of gradients in one.
  if (step_ns > kMaxIterationTotal || bytes > kMaxIterationTotal) {
    return absl::InvalidArgumentError(absl::StrCat("the single-GPU step (", step_ns,
                                                   " ns) or its gradient and buffer bytes (", bytes,
                                                   ") exceed ", kMaxIterationTotal));
  }
  return absl::OkStatus();
}

absl::Status ValidateConfig(const DdpConfig& config) {
  if (config.ranks_per_node < 1 || config.nodes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ranks_per_node and nodes must be >= 1, got ",
                                                   config.ranks_per_node, " and ", config.nodes));
  }
  // One GPU in all communicates nothing, so it needs no link constants.
  if (config.ranks_per_node * static_cast<int64_t>(config.nodes) > 1) {
    absl::Status s = ValidateAllReduce({0, config.ranks_per_node, config.nodes}, config.link);
    if (!s.ok()) return s;
  }
  if (!std::isfinite(config.compute_slowdown) || config.compute_slowdown < 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("compute_slowdown must be >= 1, got ", config.compute_slowdown));
  }
  if (config.per_bucket_host_ns < 0) {
    return absl::InvalidArgumentError("per_bucket_host_ns must be >= 0");
  }
  if (!std::isfinite(config.copy_back_memory_gbps) || config.copy_back_memory_gbps < 0) {
    return absl::InvalidArgumentError("copy_back_memory_gbps must be >= 0 (0: no copies)");
  }
  if (config.per_copy_kernel_ns < 0) {
    return absl::InvalidArgumentError("per_copy_kernel_ns must be >= 0");
  }
  return absl::OkStatus();
}

// Parameter indices by ready_after_op; stable, so gradients of one
// operation keep the caller's order.
std::vector<int> GradientReadyOrder(const std::vector<ParamGradient>& params) {
  std::vector<int> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&params](int a, int b) {
    return params[a].ready_after_op < params[b].ready_after_op;
  });
  return order;
}

// End time of a backward operation of `work_ns` started at `t`, slowed by
// `slowdown` inside the all-reduce intervals. The intervals are those
// scheduled so far: one stream, so sorted and disjoint; a bucket scheduled
// later starts after this operation ends, so it cannot slow it. `next` is
// the first interval that may still overlap; it only moves forward.
int64_t RunBackwardOp(int64_t t, int64_t work_ns, const std::vector<BucketTiming>& intervals,
                      double slowdown, size_t* next) {
  while (work_ns > 0) {
    while (*next < intervals.size() && intervals[*next].end_ns <= t) ++*next;
    if (*next == intervals.size()) return t + work_ns;
    const BucketTiming& b = intervals[*next];
    if (t < b.start_ns) {
      const int64_t gap = b.start_ns - t;
      if (work_ns <= gap) return t + work_ns;
      work_ns -= gap;
      t = b.start_ns;
    }
    const double capacity = static_cast<double>(b.end_ns - t) / slowdown;
    if (work_ns <= capacity) return t + std::llround(work_ns * slowdown);
    work_ns -= std::llround(capacity);
    t = b.end_ns;
  }
  return t;
}

struct BackwardResult {
  int64_t end_ns = 0;
  std::vector<BucketTiming> buckets;
};

// GPU time of copying one gradient of `bytes` between .grad and its
// bucket.
int64_t GradientCopyNs(int64_t bytes, const DdpConfig& config) {
  if (config.copy_back_memory_gbps <= 0) return 0;
  return config.per_copy_kernel_ns +
         std::llround(2.0 * static_cast<double>(bytes) / config.copy_back_memory_gbps);
}

// Per backward operation, the copies of the gradients it makes ready into
// their buckets (DDP's autograd hook, on the compute stream).
std::vector<int64_t> CopyInAfterOp(const SingleGpuIteration& iteration, const DdpConfig& config) {
  std::vector<int64_t> out(iteration.backward_op_ns.size(), 0);
  for (const ParamGradient& g : iteration.params) {
    out[g.ready_after_op] += GradientCopyNs(g.bytes, config);
  }
  return out;
}

// Runs the backward pass from `start_ns`, each operation followed by the
// copies of its gradients into their buckets (`copy_in`, CopyInAfterOp),
// launching each bucket when its last gradient is in (plus host time) and
// the stream is free.
BackwardResult SimulateBackward(const SingleGpuIteration& iteration, const DdpConfig& config,
                                const std::vector<Bucket>& buckets,
                                const std::vector<int64_t>& allreduce_ns,
                                const std::vector<int64_t>& copy_in, int64_t start_ns) {
  BackwardResult out;
  out.buckets.reserve(buckets.size());
  int64_t t = start_ns;
  int64_t stream_free_ns = start_ns;
  size_t next_interval = 0;
  size_t next_bucket = 0;
  for (size_t op = 0; op < iteration.backward_op_ns.size(); ++op) {
    t = RunBackwardOp(t, iteration.backward_op_ns[op] + copy_in[op], out.buckets,
                      config.compute_slowdown, &next_interval);
    for (;
         next_bucket < buckets.size() && buckets[next_bucket].last_ready_op == static_cast<int>(op);
         ++next_bucket) {
      BucketTiming timing;
      timing.bytes = buckets[next_bucket].bytes;
      timing.allreduce_ns = allreduce_ns[next_bucket];
      timing.ready_ns = t + config.per_bucket_host_ns;
      timing.start_ns = std::max(timing.ready_ns, stream_free_ns);
      timing.end_ns = timing.start_ns + timing.allreduce_ns;
      stream_free_ns = timing.end_ns;
      out.buckets.push_back(timing);
    }
  }
  out.end_ns = t;
  return out;
}

DdpStepPrediction SingleGpuPrediction(const SingleGpuIteration& iteration) {
  DdpStepPrediction p;
  p.single_gpu_step_ns = SingleGpuStepNs(iteration);
  p.step_ns = p.single_gpu_step_ns;
  p.backward_end_ns = p.step_ns - iteration.optimizer_ns;
  return p;
}

}  // namespace

int64_t SingleGpuStepNs(const SingleGpuIteration& iteration) {
  return iteration.forward_ns +
         std::accumulate(iteration.backward_op_ns.begin(), iteration.backward_op_ns.end(),
                         int64_t{0}) +
         iteration.optimizer_ns;
}

absl::StatusOr<std::vector<Bucket>> AssignBuckets(const std::vector<ParamGradient>& params,
                                                  int num_backward_ops, int64_t bucket_cap_bytes) {
  if (bucket_cap_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket_cap_bytes must be > 0, got ", bucket_cap_bytes));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].bytes < 0) {
      return absl::InvalidArgumentError(absl::StrCat("params[", i, "].bytes must be >= 0"));
    }
    if (params[i].ready_after_op < 0 || params[i].ready_after_op >= num_backward_ops) {
      return absl::InvalidArgumentError(absl::StrCat("params[", i, "].ready_after_op ",
                                                     params[i].ready_after_op, " is not in [0, ",
                                                     num_backward_ops, ")"));
    }
  }
  std::vector<Bucket> buckets;
  Bucket current;
  for (int index : GradientReadyOrder(params)) {
    current.params.push_back(index);
    current.bytes += params[index].bytes;
    current.last_ready_op = params[index].ready_after_op;
    // DDP closes a bucket once it reaches the cap, after adding the tensor.
    if (current.bytes >= bucket_cap_bytes) {
      buckets.push_back(std::move(current));
      current = Bucket();
    }
  }
  if (!current.params.empty()) buckets.push_back(std::move(current));
  return buckets;
}

absl::StatusOr<DdpStepPrediction> PredictDdpStep(const SingleGpuIteration& iteration,
                                                 const DdpConfig& config) {
  if (absl::Status s = ValidateIteration(iteration); !s.ok()) return s;
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  absl::StatusOr<std::vector<Bucket>> buckets = AssignBuckets(
      iteration.params, static_cast<int>(iteration.backward_op_ns.size()), config.bucket_cap_bytes);
  if (!buckets.ok()) return buckets.status();
  DdpStepPrediction p = SingleGpuPrediction(iteration);
  if (config.ranks_per_node * static_cast<int64_t>(config.nodes) == 1) return p;

  std::vector<int64_t> allreduce_ns;
  allreduce_ns.reserve(buckets->size());
  for (const Bucket& b : *buckets) {
    absl::StatusOr<int64_t> ns =
        AllReduceNs(config.algorithm, {b.bytes, config.ranks_per_node, config.nodes}, config.link);
    if (!ns.ok()) return ns.status();
    allreduce_ns.push_back(*ns);
  }
  if (config.broadcast_buffers && iteration.buffers > 0) {
    absl::StatusOr<int64_t> ns =
        BroadcastNs({iteration.buffer_bytes, config.ranks_per_node, config.nodes}, config.link);
    if (!ns.ok()) return ns.status();
    p.buffer_broadcast_ns = *ns + iteration.buffers * config.per_copy_kernel_ns;
  }
  const std::vector<int64_t> copy_in = CopyInAfterOp(iteration, config);
  BackwardResult backward = SimulateBackward(iteration, config, *buckets, allreduce_ns, copy_in,
                                             p.buffer_broadcast_ns + iteration.forward_ns);
  int64_t reduced_ns = backward.end_ns;
  if (!backward.buckets.empty()) reduced_ns = std::max(reduced_ns, backward.buckets.back().end_ns);
  p.copy_in_ns = std::accumulate(copy_in.begin(), copy_in.end(), int64_t{0});
  // The reduced gradients go back as they came in: one copy each.
  p.copy_back_ns = p.copy_in_ns;
  p.step_ns = reduced_ns + p.copy_back_ns + iteration.optimizer_ns;
  p.backward_end_ns = backward.end_ns;
  p.exposed_comm_ns = p.step_ns - p.single_gpu_step_ns;
  p.num_buckets = static_cast<int>(backward.buckets.size());
  p.buckets = std::move(backward.buckets);
  p.scaling_efficiency =
      p.step_ns > 0 ? static_cast<double>(p.single_gpu_step_ns) / p.step_ns : 1.0;
  return p;
}

}  // namespace habitat
