// Where an iteration's memory peak can fall at another batch, from the
// allocator readings the agent takes around each pass (MemoryUsage.passes).
//
// Walking the passes in the order they ran, the memory allocated above the
// iteration's start is split into a part that grows with the batch and a
// fixed part: the fixed part takes what parameter-sized work allocates and
// frees (AccumulateGrad, the optimizer, operations without a batch
// dimension, autocast's low-precision copies of the weights, the weight
// gradients a backward pass hands to AccumulateGrad, and what is freed
// before the first pass: zero_grad's gradients); the batch part takes the
// rest. Each pass's highest point is a candidate peak
//   start + fixed + batch * b / b0,
// and the peak at batch b is the highest candidate. At the traced batch it
// is the traced peak; away from it the peak may move (from the optimizer's
// temporaries at a small batch to the end of the forward pass at a large
// one), and gradients freed before the forward no longer scale with the
// batch as the single-part model (peak - start) * b / b0 has them do.
#pragma once

#include <optional>
#include <vector>

#include "habitat/v1/trace.pb.h"

namespace habitat {

// One candidate peak, bytes above the iteration's start at the traced
// batch: `fixed_bytes` (may be negative: memory freed) + `batch_bytes`
// (>= 0, grows with the batch). `replicated_bytes`, part of `fixed_bytes`,
// are autocast's low-precision copies of the weights held at that point:
// copies of whole parameters, which sharding the parameters over N GPUs
// (FSDP) does not divide, as it divides the rest of the fixed part.
struct MemoryPoint {
  double fixed_bytes = 0;
  double batch_bytes = 0;
  double replicated_bytes = 0;
};

// The candidates no other candidate dominates (at least as high in the
// batch part, the replicated part and the rest of the fixed part), in
// increasing batch part: the start itself ({0, 0}) or one above it first. nullopt when
// the trace has no pass readings, or when they do not reach the traced peak
// (it was set outside any recorded pass), so that they cannot say where it
// moves.
std::optional<std::vector<MemoryPoint>> PeakCandidates(const habitat::v1::Trace& trace);

}  // namespace habitat
