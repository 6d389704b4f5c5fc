#include "core/predict/fsdp_prediction.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/devices/device_rates.h"
#include "core/parallel/fsdp_timeline.h"
#include "core/predict/host_replay.h"
#include "core/predict/warning_tally.h"
#include "core/trace/fsdp_modules.h"

namespace habitat {
namespace {

namespace v1 = habitat::v1;

// The FSDP step on `link` against the single-GPU GPU step; FSDP2's copies
// at `device`'s streaming bandwidth, its host work per unit unless the
// traced host timeline already holds it (`host_work_traced`).
absl::StatusOr<FsdpStepPrediction> StepOn(const FsdpIteration& units, const v1::DeviceSpec& device,
                                          const v1::ParallelConfig& config,
                                          const LinkConstants& link, bool host_work_traced) {
  FsdpConfig fsdp;
  fsdp.ranks_per_node = static_cast<int>(config.gpus_per_node());
  fsdp.nodes = static_cast<int>(std::max<uint32_t>(config.nodes(), 1));
  fsdp.link = link;
  fsdp.copy_memory_gbps = StreamingBandwidthGbps(device);
  fsdp.compute_slowdown = kFsdpComputeSlowdownUnderCollectives;
  fsdp.host_ns_per_unit = host_work_traced ? 0 : kFsdpHostNsPerUnit;
  return PredictFsdpStep(units, fsdp);
}

// Units of `units`' bytes in forward order, FSDP2's root (the parameters
// outside the wrapped modules) one unit, gathered first.
absl::StatusOr<FsdpIteration> UnitsOfModules(const SingleGpuIteration& iteration,
                                             const FsdpModuleUnits& units) {
  std::vector<int64_t> bytes;
  if (units.root_before > 0) bytes.push_back(units.root_before);
  bytes.insert(bytes.end(), units.wrapped.begin(), units.wrapped.end());
  if (units.root_after > 0) bytes.push_back(units.root_after);
  absl::StatusOr<FsdpIteration> out = FsdpUnitsAtBytes(iteration, bytes);
  if (out.ok() && units.root_before > 0 && units.root_after > 0) FoldLastUnitIntoFirst(&*out);
  return out;
}

}  // namespace

absl::StatusOr<FsdpIteration> FsdpUnitsFor(const TraceIteration& iteration,
                                           const v1::ParallelConfig& config) {
  if (!config.fsdp_wrap().empty() && config.fsdp_units() > 0) {
    return absl::InvalidArgumentError(
        "fsdp_wrap and fsdp_units both cut the units: give one of them");
  }
  std::string wrap = config.fsdp_wrap();
  if (wrap.empty() && config.fsdp_units() == 0) wrap = RepeatedBlockClass(iteration.modules);
  if (wrap.empty()) {
    // More units than layers come out one per layer, so a cap changes
    // nothing.
    const int units = config.fsdp_units() > 0
                          ? static_cast<int>(std::min<uint32_t>(config.fsdp_units(), 1u << 20))
                          : kDefaultFsdpUnits;
    return FsdpUnitsByBytes(iteration.iteration, units);
  }
  absl::StatusOr<FsdpModuleUnits> modules = FsdpUnitsOfModuleClass(iteration.modules, wrap);
  if (!modules.ok()) return absl::InvalidArgumentError(modules.status().message());
  return UnitsOfModules(iteration.iteration, *modules);
}

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
                                                          const v1::DeviceSpec& device,
                                                          const v1::ParallelConfig& config,
                                                          const Links& links) {
  absl::StatusOr<FsdpIteration> units = FsdpUnitsFor(iteration, config);
  if (!units.ok()) return units.status();
  absl::StatusOr<FsdpStepPrediction> usual =
      StepOn(*units, device, config, links.usual, iteration.fsdp_host_work_traced);
  if (!usual.ok()) return usual.status();
  // The single-GPU step in the same terms: the timeline on one GPU (no
  // communication, copies or FSDP2 host work; the whole optimizer), host
  // gating included.
  FsdpConfig one;
  absl::StatusOr<FsdpStepPrediction> single = PredictFsdpStep(*units, one);
  if (!single.ok()) return single.status();
  const int64_t single_gpu_ns = single->step_ns;
  ParallelCommunication out;
  out.added_ns = usual->step_ns - single_gpu_ns;
  out.exposed_ns = usual->exposed_comm_ns;
  out.fsdp_units = usual->num_units;
  out.unsharded_in_flight_bytes = usual->unsharded_in_flight_bytes;
  out.host_bound = IsHostBound(usual->step_ns - usual->host_wait_ns, usual->step_ns);
  if (!links.slow) return out;
  absl::StatusOr<FsdpStepPrediction> slow =
      StepOn(*units, device, config, *links.slow, iteration.fsdp_host_work_traced);
  if (!slow.ok()) return slow.status();
  // The middle of the two, as for DDP, so that the expected error covers
  // both.
  out.span_ns = std::max<int64_t>(0, slow->step_ns - usual->step_ns);
  out.added_ns += out.span_ns / 2;
  out.exposed_ns += out.span_ns / 2;
  return out;
}

namespace {

// FsdpPeakBytesPerGpu with the batch-dependent bytes times `headroom`.
double FsdpPeakPerGpu(const MemoryModel& model, uint32_t batch, uint32_t gpus,
                      int64_t unsharded_in_flight_bytes, double headroom) {
  const double shards = std::max<uint32_t>(gpus, 1);
  const double ratio = static_cast<double>(batch) / std::max<uint32_t>(model.traced_batch, 1);
  double above_start = 0;
  for (const MemoryPoint& p : model.candidates) {
    // Autocast's copies are of the gathered, whole parameters: not divided.
    const double sharded = p.fixed_bytes - p.replicated_bytes;
    above_start = std::max(
        above_start, sharded / shards + p.replicated_bytes + p.batch_bytes * ratio * headroom);
  }
  return static_cast<double>(model.start_bytes) / shards + above_start +
         static_cast<double>(unsharded_in_flight_bytes);
}

}  // namespace

int64_t FsdpPeakBytesPerGpu(const MemoryModel& model, uint32_t batch, uint32_t gpus,
                            int64_t unsharded_in_flight_bytes) {
  constexpr double kMax = 9.0e18;  // below INT64_MAX
  return static_cast<int64_t>(std::min(
      std::round(FsdpPeakPerGpu(model, batch, gpus, unsharded_in_flight_bytes, 1.0)), kMax));
}

bool FsdpFitsMemory(const MemoryModel& model, uint32_t batch, uint32_t gpus,
                    int64_t unsharded_in_flight_bytes, int64_t usable) {
  return FsdpPeakPerGpu(model, batch, gpus, unsharded_in_flight_bytes,
                        MemoryFitHeadroom(model, batch)) <= static_cast<double>(usable);
}

MemoryModel SingleGpuMemoryOfFsdpRank(const MemoryModel& rank, int world, int64_t in_flight_bytes) {
  const double w = std::max(world, 1);
  const double in_flight = static_cast<double>(std::max<int64_t>(in_flight_bytes, 0));
  MemoryModel out = rank;
  out.start_bytes =
      static_cast<int64_t>(std::min(w * static_cast<double>(rank.start_bytes), 9.0e18));
  double highest = 0;
  for (MemoryPoint& p : out.candidates) {
    const double sharded = p.fixed_bytes - p.replicated_bytes;
    const double gathered = std::clamp(sharded, 0.0, in_flight);
    p.fixed_bytes = w * (sharded - gathered) + p.replicated_bytes;
    highest = std::max(highest, p.fixed_bytes + p.batch_bytes);
  }
  out.traced_peak_bytes =
      static_cast<int64_t>(std::min(static_cast<double>(out.start_bytes) + highest, 9.0e18));
  return out;
}

int64_t FsdpInFlightBytes(const v1::Trace& trace, const v1::ParallelConfig& config) {
  if (GpusInAll(config) <= 1) return 0;
  // Units are cut by parameter bytes alone: any times will do.
  v1::DevicePrediction timeless;
  for (int i = 0; i < trace.operations_size(); ++i) timeless.add_operations();
  absl::StatusOr<TraceIteration> iteration = IterationFromTrace(trace, timeless);
  if (!iteration.ok()) return 0;
  absl::StatusOr<FsdpIteration> units = FsdpUnitsFor(*iteration, config);
  return units.ok() ? UnshardedInFlightBytes(*units) : 0;
}

FsdpFit FitFsdp(const MemoryModel& model, int64_t usable, uint32_t step, uint32_t gpus,
                int64_t unsharded_in_flight_bytes) {
  FsdpFit fit;
  fit.largest_batch = LargestBatchWhere(model, step, [&](uint32_t batch) {
    return FsdpFitsMemory(model, batch, gpus, unsharded_in_flight_bytes, usable);
  });
  const uint32_t smallest = SmallestGridBatch(model, step);
  if (smallest == 0) return fit;
  // Fewer GPUs gather the same units: the bytes in flight stay.
  for (uint32_t g = 1; g <= std::max<uint32_t>(gpus, 1); g *= 2) {
    if (FsdpFitsMemory(model, smallest, g, unsharded_in_flight_bytes, usable)) {
      fit.fewest_gpus = g;
      break;
    }
    if (g > (1u << 30)) break;
  }
  // Batch 0: the state and the units in flight alone.
  fit.needs_activation_checkpointing =
      fit.largest_batch == 0 &&
      FsdpPeakPerGpu(model, 0, gpus, unsharded_in_flight_bytes, 1.0) <= static_cast<double>(usable);
  return fit;
}

void AddFsdpMemory(const MemoryModel& model, uint32_t batch, int64_t usable,
                   std::optional<uint32_t> fit_step, v1::DevicePrediction* prediction) {
  for (v1::ParallelPrediction& p : *prediction->mutable_parallel()) {
    if (p.kind() != v1::ParallelConfig::KIND_FULLY_SHARDED || !p.unavailable().empty()) continue;
    const uint32_t gpus = GpusInAll(p);
    p.set_peak_memory_bytes_per_gpu(
        FsdpPeakBytesPerGpu(model, batch, gpus, p.unsharded_in_flight_bytes()));
    p.set_fits_memory(FsdpFitsMemory(model, batch, gpus, p.unsharded_in_flight_bytes(), usable));
    if (fit_step.has_value()) {
      const FsdpFit fit = FitFsdp(model, usable, *fit_step, gpus, p.unsharded_in_flight_bytes());
      p.set_largest_fitting_batch(fit.largest_batch);
      p.set_fewest_gpus_to_fit(fit.fewest_gpus);
      p.set_needs_activation_checkpointing(fit.needs_activation_checkpointing);
    }
    if (!p.fits_memory()) {
      AddFsdpOutOfMemoryWarning(p, batch, usable, fit_step.has_value(), prediction);
    }
  }
}

}  // namespace habitat
