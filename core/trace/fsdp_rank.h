// A trace of one rank of an FSDP2 (fully_shard) training step, as the agent
// captures it on a multi-GPU run: its all-gathers and reduce-scatters (c10d
// operations running NCCL kernels), FSDP2's copies around them, and an
// optimizer that stepped 1/world of the parameters. A model too large for
// one GPU can only be traced so. It is predicted as the single-GPU step its
// work amounts to, which every FSDP configuration then shards again
// (docs/multi_gpu.md, section 6, "From one FSDP rank").
#pragma once

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// The world size of the FSDP step `trace` is one rank of: the ratio of each
// all-gather's output to its input (c10d::_allgather_base_), the same for
// all; nullopt for a trace without such all-gathers. INVALID_ARGUMENT where
// they disagree or the ratio is not a whole number >= 2.
absl::StatusOr<std::optional<int>> FsdpRankWorldSize(const habitat::v1::Trace& trace);

// The FSDP units the rank's step gathered: its all-gathers before the
// forward (c10d::_allgather_base_ operations; the backward's are launched
// from autograd hooks and recorded under other operations). The user's
// wrapping policy, as it ran.
int FsdpRankUnits(const habitat::v1::Trace& trace);

// Whether `kernel_name`, launched by `op`, is communication or one of
// FSDP2's copies: NCCL kernels, the all-gather's copy-in (a foreach copy
// outside the optimizer) and copy-out (split_with_sizes_copy), and the
// reduce-scatter's copy-in (chunk_cat).
bool IsFsdpCommunicationKernel(const habitat::v1::Operation& op, absl::string_view kernel_name);

// The single-GPU step a rank's work amounts to: its communication and
// FSDP2's copy kernels removed (an FSDP prediction models them for its own
// configuration), the optimizer's kernels and copies `world` times as long
// with `world` times the blocks (the rank stepped 1/world of the
// parameters), no measured wall or busy time (the rank's held the
// communication), and no memory usage (the rank's is sharded). Operations
// keep their places, so gradient producers still point at them.
habitat::v1::Trace SingleGpuStepOfFsdpRank(const habitat::v1::Trace& trace, int world);

}  // namespace habitat
