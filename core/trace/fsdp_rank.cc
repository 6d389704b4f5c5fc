#include "core/trace/fsdp_rank.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/time_units.h"
#include "core/trace/op_classification.h"

namespace habitat {
namespace {

namespace v1 = habitat::v1;

constexpr absl::string_view kAllGather = "c10d::_allgather_base_";

// NCCL's kernels: ncclDevKernel_AllGather_RING_LL, ncclKernel_... .
bool IsNcclKernel(absl::string_view name) {
  return absl::StrContains(absl::AsciiStrToLower(name), "nccl");
}

// In doubles: a hostile trace's shapes may not multiply within int64.
double Elements(const v1::TensorArgument& tensor) {
  double n = 1;
  for (int64_t d : tensor.shape()) n *= static_cast<double>(d);
  return n;
}

// An all-gather's output over input elements; 0 where its arguments are
// not two tensors or the ratio is not a whole number.
int64_t GatherRatio(const v1::Operation& op) {
  if (op.arguments_size() < 2 || !op.arguments(0).has_tensor() || !op.arguments(1).has_tensor()) {
    return 0;
  }
  const double in = Elements(op.arguments(1).tensor());
  const double out = Elements(op.arguments(0).tensor());
  if (!(in > 0) || !(out > 0)) return 0;
  const double ratio = out / in;
  if (!(ratio < static_cast<double>(1 << 21)) || ratio != std::floor(ratio)) return 0;
  return static_cast<int64_t>(ratio);
}

// Drops `pass`'s communication and copy kernels, and their time from the
// pass's.
void DropCommunication(const v1::Operation& op, v1::Pass* pass) {
  auto* kernels = pass->mutable_kernels();
  int kept = 0;
  int64_t dropped_ns = 0;
  for (int k = 0; k < kernels->size(); ++k) {
    if (IsFsdpCommunicationKernel(op, kernels->Get(k).name())) {
      dropped_ns += kernels->Get(k).duration_ns();
      continue;
    }
    if (kept != k) kernels->SwapElements(kept, k);
    ++kept;
  }
  kernels->DeleteSubrange(kept, kernels->size() - kept);
  pass->set_time_ns(std::max<int64_t>(0, pass->time_ns() - dropped_ns));
}

// The pass `world` times as long, with `world` times the blocks: one rank
// stepped 1/world of the parameters.
void Unshard(int world, v1::Pass* pass) {
  const double w = world;
  pass->set_time_ns(SaturatingRound(static_cast<double>(pass->time_ns()) * w));
  pass->set_rerun_time_ns(SaturatingRound(static_cast<double>(pass->rerun_time_ns()) * w));
  for (v1::Kernel& k : *pass->mutable_kernels()) {
    k.set_duration_ns(SaturatingRound(static_cast<double>(k.duration_ns()) * w));
    k.mutable_grid()->set_x(
        static_cast<uint32_t>(std::min(static_cast<double>(k.grid().x()) * w,
                                       static_cast<double>(std::numeric_limits<uint32_t>::max()))));
  }
  for (v1::MemoryActivity& m : *pass->mutable_memory()) {
    m.set_duration_ns(SaturatingRound(static_cast<double>(m.duration_ns()) * w));
    m.set_bytes(static_cast<uint64_t>(std::min(static_cast<double>(m.bytes()) * w, 1.8e19)));
  }
}

}  // namespace

absl::StatusOr<std::optional<int>> FsdpRankWorldSize(const v1::Trace& trace) {
  std::optional<int> world;
  for (const v1::Operation& op : trace.operations()) {
    if (op.name() != kAllGather) continue;
    const int64_t ratio = GatherRatio(op);
    if (ratio < 2 || ratio > (1 << 20)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "an all-gather (", kAllGather, ") of the trace gathers ", ratio,
          " times its input; one FSDP rank's gathers take a whole number >= 2 (the GPUs)"));
    }
    if (world.has_value() && *world != ratio) {
      return absl::InvalidArgumentError(
          absl::StrCat("the trace's all-gathers disagree on the number of GPUs (", *world, " and ",
                       ratio, "): one FSDP rank over one process group is modelled"));
    }
    world = static_cast<int>(ratio);
  }
  return world;
}

int FsdpRankUnits(const v1::Trace& trace) {
  int units = 0;
  for (const v1::Operation& op : trace.operations()) units += op.name() == kAllGather;
  return units;
}

bool IsFsdpCommunicationKernel(const v1::Operation& op, absl::string_view kernel_name) {
  if (IsNcclKernel(kernel_name)) return true;
  if (absl::StrContains(kernel_name, "split_with_sizes_copy_out") ||
      absl::StrContains(kernel_name, "chunk_cat_cuda_kernel")) {
    return true;
  }
  // FSDP2's copy-in is a foreach copy; the autograd node it runs under in
  // the backward is whichever one is active.
  return absl::StartsWith(op.name(), "fsdp::") ||
         (!IsOptimizerStep(op) && absl::StrContains(kernel_name, "multi_tensor_apply") &&
          absl::StrContains(kernel_name, "at::native::Copy<"));
}

v1::Trace SingleGpuStepOfFsdpRank(const v1::Trace& trace, int world) {
  v1::Trace out = trace;
  for (v1::Operation& op : *out.mutable_operations()) {
    const bool has_backward = op.has_backward();
    if (IsOptimizerStep(op)) {
      Unshard(world, op.mutable_forward());
      if (has_backward) Unshard(world, op.mutable_backward());
      continue;
    }
    // FSDP2's small host-to-device copies (split sizes) stay: a few
    // microseconds each, and the host's copy calls are timed by them.
    DropCommunication(op, op.mutable_forward());
    if (has_backward) DropCommunication(op, op.mutable_backward());
  }
  auto* unattributed = out.mutable_unattributed_kernels();
  for (int k = unattributed->size() - 1; k >= 0; --k) {
    if (IsNcclKernel(unattributed->Get(k).name())) {
      unattributed->DeleteSubrange(k, 1);
    }
  }
  out.set_iteration_wall_ns(0);
  out.set_iteration_gpu_busy_ns(0);
  out.clear_memory();
  return out;
}

}  // namespace habitat
