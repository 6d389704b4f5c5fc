#include "core/predict/fsdp_prediction.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/parallel/fsdp_timeline.h"

namespace habitat {
namespace {

namespace v1 = habitat::v1;

// The FSDP step on `link` against the single-GPU GPU step.
absl::StatusOr<FsdpStepPrediction> StepOn(const FsdpIteration& units,
                                          const v1::ParallelConfig& config,
                                          const LinkConstants& link) {
  FsdpConfig fsdp;
  fsdp.ranks_per_node = static_cast<int>(config.gpus_per_node());
  fsdp.nodes = static_cast<int>(std::max<uint32_t>(config.nodes(), 1));
  fsdp.link = link;
  return PredictFsdpStep(units, fsdp);
}

}  // namespace

absl::Status CheckModelledParallelism(const v1::ParallelConfig& config) {
  if (config.cpu_offload()) {
    return absl::InvalidArgumentError(
        "CPU offload is not modelled: its host-device copies and host optimizer step are not in "
        "a GPU trace");
  }
  switch (config.kind()) {
    case v1::ParallelConfig::KIND_DATA_PARALLEL:
    case v1::ParallelConfig::KIND_FULLY_SHARDED:
      return absl::OkStatus();
    case v1::ParallelConfig::KIND_HYBRID_SHARDED:
      return absl::InvalidArgumentError(
          "hybrid sharding (shard within a node, replicate across nodes) is not modelled: only "
          "DDP and FSDP sharded over every GPU are");
    case v1::ParallelConfig::KIND_TENSOR_PARALLEL:
    case v1::ParallelConfig::KIND_PIPELINE_PARALLEL:
      return absl::InvalidArgumentError(absl::StrCat(
          v1::ParallelConfig::Kind_Name(config.kind()),
          " is not modelled: a single-GPU trace does not show how its layers would be split"));
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown parallelism kind ", static_cast<int>(config.kind())));
  }
}

absl::StatusOr<ParallelCommunication> FsdpCommunicationOn(const TraceIteration& iteration,
                                                          const v1::ParallelConfig& config,
                                                          const Links& links) {
  // More units than layers come out one per layer, so a cap changes nothing.
  const int num_units = config.fsdp_units() > 0
                            ? static_cast<int>(std::min<uint32_t>(config.fsdp_units(), 1u << 20))
                            : kDefaultFsdpUnits;
  absl::StatusOr<FsdpIteration> units = FsdpUnitsByBytes(iteration.iteration, num_units);
  if (!units.ok()) return units.status();
  absl::StatusOr<FsdpStepPrediction> usual = StepOn(*units, config, links.usual);
  if (!usual.ok()) return usual.status();
  const int64_t single_gpu_ns = SingleGpuStepNs(iteration.iteration);
  ParallelCommunication out;
  out.added_ns = usual->step_ns - single_gpu_ns;
  out.exposed_ns = usual->exposed_comm_ns;
  out.fsdp_units = usual->num_units;
  out.unsharded_in_flight_bytes = usual->unsharded_in_flight_bytes;
  if (!links.slow) return out;
  absl::StatusOr<FsdpStepPrediction> slow = StepOn(*units, config, *links.slow);
  if (!slow.ok()) return slow.status();
  // The middle of the two, as for DDP, so that the expected error covers
  // both.
  out.span_ns = std::max<int64_t>(0, slow->step_ns - usual->step_ns);
  out.added_ns += out.span_ns / 2;
  out.exposed_ns += out.span_ns / 2;
  return out;
}

int64_t FsdpPeakBytesPerGpu(const MemoryModel& model, uint32_t batch, uint32_t gpus,
                            int64_t unsharded_in_flight_bytes) {
  const double shards = std::max<uint32_t>(gpus, 1);
  const double ratio = static_cast<double>(batch) / std::max<uint32_t>(model.traced_batch, 1);
  double above_start = 0;
  for (const MemoryPoint& p : model.candidates) {
    // Autocast's copies are of the gathered, whole parameters: not divided.
    const double sharded = p.fixed_bytes - p.replicated_bytes;
    above_start =
        std::max(above_start, sharded / shards + p.replicated_bytes + p.batch_bytes * ratio);
  }
  const double bytes = static_cast<double>(model.start_bytes) / shards + above_start +
                       static_cast<double>(unsharded_in_flight_bytes);
  constexpr double kMax = 9.0e18;  // below INT64_MAX
  return static_cast<int64_t>(std::min(std::round(bytes), kMax));
}

void AddFsdpMemory(const MemoryModel& model, uint32_t batch, v1::DevicePrediction* prediction) {
  for (v1::ParallelPrediction& p : *prediction->mutable_parallel()) {
    if (p.kind() != v1::ParallelConfig::KIND_FULLY_SHARDED || !p.unavailable().empty()) continue;
    p.set_peak_memory_bytes_per_gpu(
        FsdpPeakBytesPerGpu(model, batch, p.gpus_per_node() * std::max<uint32_t>(p.nodes(), 1),
                            p.unsharded_in_flight_bytes()));
  }
}

}  // namespace habitat
