#include "core/predict/memory_timeline.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "core/predict/batch_scaling.h"
#include "core/predict/op_traffic.h"
#include "core/trace/op_classification.h"

namespace habitat {
namespace {

namespace v1 = habitat::v1;
using Shapes = absl::flat_hash_set<std::vector<int64_t>>;

// A traced peak this close above the highest pass reading (allocator
// rounding, a tensor freed after the last reading) still counts as reached.
constexpr double kUnexplainedPeakShare = 0.01;

bool IsParameterShaped(const v1::TensorArgument& tensor, const Shapes& parameters) {
  return parameters.contains(std::vector<int64_t>(tensor.shape().begin(), tensor.shape().end()));
}

// What autocast allocates for the operation's fp32 weights: a half-precision
// copy of each (cached until autocast exits), for the matrix multiplies,
// convolutions and RNNs it casts.
double AutocastCopyBytes(const v1::Operation& op, const Shapes& parameters) {
  if (!IsKernelVaryingOperation(op)) return 0;
  double bytes = 0;
  for (const v1::Argument& arg : op.arguments()) {
    if (arg.has_tensor() && arg.tensor().dtype() == "float" &&
        IsParameterShaped(arg.tensor(), parameters)) {
      bytes += TensorBytes(arg.tensor()) / 2;
    }
  }
  return bytes;
}

// The gradient AccumulateGrad takes: its first tensor argument's bytes.
double GradientBytes(const v1::Operation& accumulate) {
  for (const v1::Argument& arg : accumulate.arguments()) {
    if (arg.has_tensor()) return TensorBytes(arg.tensor());
  }
  return 0;
}

// The weight gradients pass `i` hands on: those of the AccumulateGrad
// passes that run right after it (the autograd engine runs them first,
// ahead of any other ready node).
double HandedGradientBytes(const v1::Trace& trace, int i) {
  const auto& passes = trace.memory().passes();
  double bytes = 0;
  for (int j = i + 1; j < passes.size(); ++j) {
    const v1::Operation& op = trace.operations(passes[j].operation());
    if (!IsAccumulateGrad(op)) break;
    bytes += GradientBytes(op);
  }
  return bytes;
}

// The running split of allocated - start.
struct Split {
  double fixed = 0;
  double batch = 0;
};

// Adds the change between two passes (`gap`): fixed before the first pass
// (zero_grad) and after fixed work; at the first backward pass after the
// forward, a release up to the autocast copies still held is theirs (autocast
// frees its cache on exit); otherwise it is the batch's (Python dropping
// activations, autograd freeing saved tensors).
void AddGap(double gap, bool first, bool after_fixed, bool forward_to_backward,
            double* autocast_held, Split* split) {
  if (first || after_fixed) {
    split->fixed += gap;
    return;
  }
  if (forward_to_backward && gap < 0) {
    const double released = std::min(-gap, *autocast_held);
    *autocast_held -= released;
    split->fixed -= released;
    gap += released;
  }
  split->batch += gap;
}

// The candidates no other is at least as high as at every batch and over
// any number of GPUs sharing the parameters (in the batch part, the
// replicated part and the rest of the fixed part): a handful of the
// thousands of passes, in increasing batch part. Taken in decreasing batch
// part (then fixed, then replicated), a point can only be dominated by one
// taken before it; those kept so far stand in a staircase over (the rest of
// the fixed part, replicated), so each test and insertion is logarithmic.
std::vector<MemoryPoint> Undominated(std::vector<MemoryPoint> points) {
  std::sort(points.begin(), points.end(), [](const MemoryPoint& a, const MemoryPoint& b) {
    if (a.batch_bytes != b.batch_bytes) return a.batch_bytes > b.batch_bytes;
    if (a.fixed_bytes != b.fixed_bytes) return a.fixed_bytes > b.fixed_bytes;
    return a.replicated_bytes > b.replicated_bytes;
  });
  // Sharded part -> replicated part of the kept points that no other kept
  // point beats in both: replicated decreases as the sharded part grows, so
  // the first entry at or past a sharded part holds the most replicated
  // bytes of all at or past it.
  std::map<double, double> staircase;
  std::vector<MemoryPoint> kept;
  for (const MemoryPoint& p : points) {
    const double sharded = p.fixed_bytes - p.replicated_bytes;
    const auto above = staircase.lower_bound(sharded);
    if (above != staircase.end() && above->second >= p.replicated_bytes) continue;
    kept.push_back(p);
    // Drop the steps it beats in both (at or below its sharded part, no
    // more replicated), then take its own.
    auto next = staircase.upper_bound(sharded);
    while (next != staircase.begin() && std::prev(next)->second <= p.replicated_bytes) {
      next = staircase.erase(std::prev(next));
    }
    staircase.emplace(sharded, p.replicated_bytes);
  }
  std::reverse(kept.begin(), kept.end());
  return kept;
}

}  // namespace

std::optional<std::vector<MemoryPoint>> PeakCandidates(const v1::Trace& trace) {
  const v1::MemoryUsage& memory = trace.memory();
  if (memory.passes().empty() || !memory.has_allocated_bytes_at_start() ||
      !memory.has_peak_allocated_bytes()) {
    return std::nullopt;
  }
  const Shapes parameters = ParameterShapes(trace);
  const std::vector<bool> carrying = BatchCarryingOperations(trace, parameters);
  const bool autocast = trace.math().has_autocast_dtype() && !trace.math().autocast_dtype().empty();
  const double start = static_cast<double>(memory.allocated_bytes_at_start());

  std::vector<MemoryPoint> points = {MemoryPoint{}};
  Split split;
  double previous_after = start;
  double running_peak = start;
  double autocast_held = 0;
  bool previous_fixed = false;
  bool previous_backward = false;
  double highest = start;
  for (int i = 0; i < memory.passes_size(); ++i) {
    const v1::PassMemory& pass = memory.passes(i);
    const v1::Operation& op = trace.operations(pass.operation());
    const bool fixed = !carrying[pass.operation()];
    const double before = static_cast<double>(pass.allocated_bytes_before());
    const double after = static_cast<double>(pass.allocated_bytes_after());
    const double peak_after = static_cast<double>(pass.peak_allocated_bytes_after());
    AddGap(before - previous_after, i == 0, previous_fixed, pass.backward() && !previous_backward,
           &autocast_held, &split);

    double own_fixed = 0;  // parameter-sized allocations of a batch pass
    if (!fixed && !pass.backward() && autocast) own_fixed = AutocastCopyBytes(op, parameters);
    if (!fixed && pass.backward()) own_fixed = HandedGradientBytes(trace, i);

    // The pass's highest point: where the iteration's peak rose during it,
    // else the higher of its ends (its transients stay unknown).
    const double high = peak_after > running_peak ? peak_after : std::max(before, after);
    running_peak = std::max(running_peak, peak_after);
    highest = std::max(highest, high);
    const double rise = std::max(0.0, high - before);
    const double rise_fixed = fixed ? rise : std::min(rise, own_fixed);
    const bool copies = !fixed && !pass.backward() && own_fixed > 0;
    points.push_back({split.fixed + rise_fixed, split.batch + rise - rise_fixed,
                      autocast_held + (copies ? rise_fixed : 0)});

    const double change = after - before;
    if (fixed) {
      split.fixed += change;
    } else {
      split.fixed += own_fixed;
      split.batch += change - own_fixed;
      if (!pass.backward()) autocast_held += own_fixed;
    }
    previous_after = after;
    previous_fixed = fixed;
    previous_backward = pass.backward();
  }
  const double traced_peak = static_cast<double>(memory.peak_allocated_bytes());
  if (traced_peak - highest > kUnexplainedPeakShare * std::max(traced_peak - start, 1.0)) {
    return std::nullopt;
  }
  // A batch part below zero (more freed than allocated since the start)
  // is kept at the traced batch's value as fixed, so every candidate grows
  // with the batch.
  for (MemoryPoint& p : points) {
    if (p.batch_bytes < 0) {
      p.fixed_bytes += p.batch_bytes;
      p.batch_bytes = 0;
    }
  }
  return Undominated(std::move(points));
}

}  // namespace habitat
