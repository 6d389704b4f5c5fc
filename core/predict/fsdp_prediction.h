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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/predict/ddp_prediction.h"
#include "core/predict/memory_prediction.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

// InvalidArgument, saying why, for a configuration neither the DDP nor the
// FSDP model represents: hybrid sharding, tensor or pipeline parallelism,
// CPU offload. OK otherwise.
absl::Status CheckModelledParallelism(const habitat::v1::ParallelConfig& config);

// The FSDP step on `links` (ParallelConfig.fsdp_units units of about equal
// bytes, FsdpUnitsByBytes) compared with the single-GPU GPU step of
// `iteration`; where the bandwidth is a range, the middle of its ends.
absl::StatusOr<ParallelCommunication> FsdpCommunicationOn(const TraceIteration& iteration,
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

// Sets ParallelPrediction.peak_memory_bytes_per_gpu on each available
// fully sharded configuration of `prediction`, at `batch`.
void AddFsdpMemory(const MemoryModel& model, uint32_t batch,
                   habitat::v1::DevicePrediction* prediction);

}  // namespace habitat
