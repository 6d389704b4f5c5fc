// Another batch size from one trace: the trace as the origin GPU would have
// run it at the target batch, for the engine to predict on every GPU.
//
// An operation carries the batch when one of its tensor inputs has the
// batch in a known place (dimension 0 a multiple of it: batch-first or a
// flattened batch x sequence; dimension 1 or 2 equal to it: sequence-first
// RNN inputs and states; dimension 1 a multiple of it in a 3-d tensor:
// attention's batch x heads) and is not shaped like a parameter (the shapes
// AccumulateGrad receives). Its inputs get the new batch and each of its
// kernels and copies takes
//   t' = t0 + (t - t0) * r,   r = target / traced batch,  t0 = min(t, fixed)
// where `fixed` is the part of a kernel that does not grow with its work
// (launch ramp, prologue, tail; for GEMMs, convolutions, RNNs and attention
// also tile set-up, split-K reductions and the RNN's serial steps). The
// optimizer, AccumulateGrad and operations without a batch dimension keep
// their time. docs/batch_scaling_study.md measured this against the
// H100/H200 batch fixtures and the alternatives it beat (linear, wave
// quantisation); its figures are there ("Results in one table"), not here.
//
// A kernel-varying pass the agent re-ran at other batches (Pass.batch_reruns,
// with the traced batch among them) takes instead
//   t' = max(t + rerun(target) - rerun(traced), t * rerun(target) / rerun(traced))
// where rerun(target) is measured, or interpolated log-log between the two
// nearest measured batches around it: the libraries' choice of kernels at
// the other batch is measured, not modelled. The iteration's pass differs
// from its lone re-run by launch gaps (a fixed part: the difference) and by
// caches its inputs are warm in (a part that grows with the work: the
// ratio); it keeps at most the smaller of the two advantages, so a pass
// whose re-run ran from cold memory does not shrink below what the re-runs
// themselves measured (the study's section "Re-running the kernel-varying
// operations at the other batch" has the figures).
// Outside the measured batches the rule above stands.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "core/predict/warning_tally.h"
#include "habitat/v1/prediction_service.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// The fixed part of one kernel, by the kind of operation that launched it
// (fitted on the H200 batch fixtures, docs/batch_scaling_study.md).
inline constexpr int64_t kBatchFixedKernelVaryingNs = 8000;
inline constexpr int64_t kBatchFixedOtherNs = 1000;

// Farthest a trace is scaled, either way: beyond, kernels switch and memory
// runs out long before the formula's error could be stated.
inline constexpr double kMaxBatchScale = 256;

struct BatchScaledTrace {
  habitat::v1::Trace trace;
  double ratio = 1;
  // Operations with device work whose batch dimension could not be found
  // (no tensor inputs to tell): kept at the traced batch's time.
  std::vector<std::string> unscaled_operations;
  // Their share of the traced GPU time, in [0, 1].
  double unscaled_share = 0;
  // Share of the traced kernel-varying GPU time of batch-carrying operations
  // that was scaled from re-runs (Pass.batch_reruns) rather than the rule.
  double rerun_share = 0;
  // Whether batch-carrying kernel-varying operations took any GPU time: what
  // re-runs could have covered.
  bool has_kernel_varying = false;
};

// INVALID_ARGUMENT when the trace records no batch size or `batch_size` is
// 0 or more than kMaxBatchScale times larger or smaller.
absl::StatusOr<BatchScaledTrace> ScaleTraceToBatch(const habitat::v1::Trace& trace,
                                                   uint32_t batch_size);

// The shapes of the trace's parameters: what AccumulateGrad receives. A
// tensor of such a shape is a weight, not an activation, even when its
// first dimension happens to be a multiple of the batch.
absl::flat_hash_set<std::vector<int64_t>> ParameterShapes(const habitat::v1::Trace& trace);

// Per operation of `trace`, whether its work carries the batch (what
// ScaleTraceToBatch scales); false for parameter-sized work (AccumulateGrad,
// the optimizer), operations whose tensors have no batch dimension and ones
// with no tensors to tell. All false when the trace records no batch size.
// `parameters`: ParameterShapes(trace).
std::vector<bool> BatchCarryingOperations(
    const habitat::v1::Trace& trace, const absl::flat_hash_set<std::vector<int64_t>>& parameters);

// Expected absolute error the scaling adds, percent, for a ratio `r`: a
// fixed amount per doubling or halving, fitted to the study's H100 MAPE
// (docs/batch_scaling_study.md), smaller in proportion to `rerun_share`, the
// share of the kernel-varying time scaled from re-runs. The rates are the
// constants in batch_scaling.cc.
double BatchScalingErrorPercent(double r, double rerun_share = 0);

// The pass's re-run time at `batch`: measured, or interpolated log-log
// between the two nearest measured batches around it; nullopt when `batch`
// is outside them or the pass has no re-runs.
std::optional<double> RerunAtBatch(const habitat::v1::Pass& pass, uint32_t batch);

// A prediction made from a scaled trace: on the origin GPU its operations
// were scaled, not measured (PREDICTION_METHOD_BATCH_SCALED), and on every
// GPU the expected error grows by the scaling's.
void MarkBatchScaled(const BatchScaledTrace& scaled, habitat::v1::DevicePrediction* prediction);

// What the response says about the scaling, from a trace at `traced_batch`
// (kinds batch_scaled, no_batch_reruns, batch_dimension_missing; no GPUs:
// the caller knows which it predicted from `scaled`).
std::vector<KindedWarning> BatchScalingWarnings(const BatchScaledTrace& scaled,
                                                uint32_t traced_batch);

}  // namespace habitat
