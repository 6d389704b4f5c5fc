// Fully sharded data-parallel (FSDP2) steps and memory of a predicted
// trace (docs/multi_gpu.md, "Fully sharded data parallel"): the units the
// trace's parameters are cut into, the step on N of a GPU
// (core/parallel/fsdp_timeline.h) and the peak memory on each GPU. Which
// configurations the data-parallel models cannot represent is said here.
//
// Not validated against measured FSDP steps: no multi-GPU machine was lent
// to run them.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/parallel/fsdp_timeline.h"
#include "core/predict/ddp_prediction.h"
#include "core/predict/memory_prediction.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

// InvalidArgument, saying why, for a configuration neither the DDP nor the
// FSDP model represents: hybrid sharding, tensor or pipeline parallelism,
// CPU offload. OK otherwise.
absl::Status CheckModelledParallelism(const habitat::v1::ParallelConfig& config);

// The units `config` cuts `iteration`'s parameters into: one per
// outermost instance of its fsdp_wrap class and FSDP2's root (the
// parameters outside them) first; else fsdp_units of about equal bytes;
// else, where the trace names its modules, per instance of its repeated
// block class (RepeatedBlockClass); else kDefaultFsdpUnits equal ones.
// InvalidArgument for fsdp_wrap with fsdp_units, or a class the trace does
// not have (or no modules).
absl::StatusOr<FsdpIteration> FsdpUnitsFor(const TraceIteration& iteration,
                                           const habitat::v1::ParallelConfig& config);

// The FSDP step on `links` (FsdpUnitsFor's units) compared with the
// single-GPU GPU step of
// `iteration`, FSDP2's copies at `device`'s streaming bandwidth; where the
// link's bandwidth is a range, the middle of its ends.
absl::StatusOr<ParallelCommunication> FsdpCommunicationOn(const TraceIteration& iteration,
                                                          const habitat::v1::DeviceSpec& device,
                                                          const habitat::v1::ParallelConfig& config,
                                                          const Links& links);

// Peak allocated bytes on each of `gpus` GPUs at `batch`: what the trace
// held at the start (parameters, optimizer state, gradients kept) and the
// parameter-sized part of each candidate peak (gradients, optimizer
// temporaries: memory_timeline.h's fixed part) divided among the GPUs, but
// autocast's copies of the weights (its replicated part: copies of the
// gathered parameters) and the batch part (activations) whole, plus
// `unsharded_in_flight_bytes`.
int64_t FsdpPeakBytesPerGpu(const MemoryModel& model, uint32_t batch, uint32_t gpus,
                            int64_t unsharded_in_flight_bytes);

// Whether `batch` fits on each of `gpus` GPUs with `usable` bytes each:
// FsdpPeakBytesPerGpu with its batch part times MemoryFitHeadroom.
bool FsdpFitsMemory(const MemoryModel& model, uint32_t batch, uint32_t gpus,
                    int64_t unsharded_in_flight_bytes, int64_t usable);

// The single-GPU memory the rank of an FSDP step over `world` GPUs whose
// own model is `rank` amounts to: its start and, of each candidate's fixed
// bytes, what it held sharded `world` times as large; what it held whole
// (autocast's copies of gathered weights, and up to `in_flight_bytes` of
// gathered units, which FsdpPeakBytesPerGpu adds again) as it is; the
// batch part (activations) as it is. At `world` GPUs the FSDP peak is then
// the rank's own (docs/multi_gpu.md, section 6, "From one FSDP rank").
MemoryModel SingleGpuMemoryOfFsdpRank(const MemoryModel& rank, int world, int64_t in_flight_bytes);

// The units in flight (UnshardedInFlightBytes) of `config`'s units of
// `trace`'s parameters, which do not depend on any GPU's times; 0 where the
// trace has no gradients (an inference trace) or one GPU in all.
int64_t FsdpInFlightBytes(const habitat::v1::Trace& trace,
                          const habitat::v1::ParallelConfig& config);

// What a fit finds for FSDP on `gpus` GPUs of `usable` bytes each, on the
// fit's batch grid (`step`, LargestFittingBatch's).
struct FsdpFit {
  uint32_t largest_batch = 0;  // per GPU; 0: none fits
  uint32_t fewest_gpus = 0;    // ParallelPrediction.fewest_gpus_to_fit
  bool needs_activation_checkpointing = false;
};
FsdpFit FitFsdp(const MemoryModel& model, int64_t usable, uint32_t step, uint32_t gpus,
                int64_t unsharded_in_flight_bytes);

// On each available fully sharded configuration of `prediction`, at
// `batch`: ParallelPrediction.peak_memory_bytes_per_gpu and fits_memory
// (against `usable` bytes), and with a fit (`fit_step` set) what FitFsdp
// finds; a configuration that does not fit gets a warning saying what does.
void AddFsdpMemory(const MemoryModel& model, uint32_t batch, int64_t usable,
                   std::optional<uint32_t> fit_step, habitat::v1::DevicePrediction* prediction);

}  // namespace habitat
