#include "core/predict/ddp_prediction.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/time_units.h"
#include "core/predict/fsdp_prediction.h"
#include "core/predict/op_traffic.h"
#include "core/pricing/price_catalog.h"
#include "core/trace/op_classification.h"

namespace habitat {
namespace {

namespace v1 = habitat::v1;

bool SameShape(const v1::TensorArgument& a, const v1::TensorArgument& b) {
  return a.shape_size() == b.shape_size() &&
         std::equal(a.shape().begin(), a.shape().end(), b.shape().begin());
}

// Whether `op` took a tensor shaped like `param`.
bool Takes(const v1::Operation& op, const v1::TensorArgument& param) {
  for (const v1::Argument& arg : op.arguments()) {
    if (arg.has_tensor() && SameShape(arg.tensor(), param)) return true;
  }
  return false;
}

// A hostile trace's shapes, times and their sums saturate here instead of
// overflowing int64; PredictDdpStep refuses what comes near it.
constexpr double kSaturation = 1e18;

int64_t GradientBytes(const v1::TensorArgument& param) {
  return static_cast<int64_t>(std::min(TensorBytes(param), kSaturation));
}

// A training-mode batch norm with running statistics (arguments 3 and 4 of
// aten::batch_norm) owns three buffers: running_mean, running_var and the
// int64 num_batches_tracked.
bool HasRunningStats(const v1::Operation& op) {
  return op.name() == "aten::batch_norm" && op.arguments_size() >= 5 &&
         op.arguments(3).has_tensor() && op.arguments(4).has_tensor();
}
constexpr int kBuffersPerBatchNorm = 3;
constexpr int64_t kNumBatchesTrackedBytes = 8;

// The position in the backward order after which the gradient that `op`
// (an AccumulateGrad) accumulates is complete: its producer where the trace
// records one, else the first backward operation from `cursor` on that
// took a tensor of the parameter's shape; -1 when none did. `position`:
// per operation index, its place in the backward order or -1.
int GradientReadyAt(const v1::Trace& trace, const v1::Operation& op,
                    const std::vector<int>& backward_ops, const std::vector<int>& position,
                    size_t cursor) {
  if (op.has_gradient_producer() && op.gradient_producer() < position.size() &&
      position[op.gradient_producer()] >= 0) {
    return position[op.gradient_producer()];
  }
  const v1::TensorArgument& param = op.arguments(0).tensor();
  for (size_t j = cursor; j < backward_ops.size(); ++j) {
    if (Takes(trace.operations(backward_ops[j]), param)) return static_cast<int>(j);
  }
  return -1;
}

// *total += value, saturating at kSaturation.
void Accumulate(int64_t value, int64_t* total) {
  *total = static_cast<int64_t>(
      std::min(static_cast<double>(*total) + static_cast<double>(value), kSaturation));
}

// Kernels no operation claimed ran somewhere in the iteration; counting
// them with the forward keeps the single-GPU step equal to the GPU time.
void AddUnclaimedToForward(const v1::DevicePrediction& prediction, SingleGpuIteration* it) {
  int64_t attributed = 0;
  Accumulate(it->forward_ns, &attributed);
  for (int64_t ns : it->backward_op_ns) Accumulate(ns, &attributed);
  Accumulate(it->optimizer_ns, &attributed);
  if (prediction.gpu_time_ns() > attributed) {
    Accumulate(prediction.gpu_time_ns() - attributed, &it->forward_ns);
  }
}

}  // namespace

absl::StatusOr<TraceIteration> IterationFromTrace(const v1::Trace& trace,
                                                  const v1::DevicePrediction& prediction) {
  if (prediction.operations_size() != trace.operations_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prediction has ", prediction.operations_size(), " operations where the trace has ",
        trace.operations_size(), " (a data-parallel step needs the per-operation breakdown)"));
  }
  TraceIteration out;
  out.modules = trace.modules();
  SingleGpuIteration& it = out.iteration;
  // Forward operations with a backward pass, last first: the backward order.
  std::vector<int> backward_ops;
  for (int i = trace.operations_size() - 1; i >= 0; --i) {
    const v1::Operation& op = trace.operations(i);
    if (op.has_backward() && !IsAccumulateGrad(op) && !IsOptimizerStep(op))
      backward_ops.push_back(i);
  }
  it.backward_op_ns.assign(backward_ops.size(), 0);
  std::vector<int> position(trace.operations_size(), -1);
  for (size_t j = 0; j < backward_ops.size(); ++j) {
    Accumulate(prediction.operations(backward_ops[j]).predicted_backward_ns(),
               &it.backward_op_ns[j]);
    position[backward_ops[j]] = static_cast<int>(j);
  }
  it.forward_op_ns.assign(backward_ops.size(), 0);
  size_t cursor = 0;  // the backward operation the last gradient followed
  // The forward operation with a backward pass that ran last, as its place
  // in the backward order; before the first one, the first one's.
  int forward_slot = static_cast<int>(backward_ops.size()) - 1;
  for (int i = 0; i < trace.operations_size(); ++i) {
    const v1::Operation& op = trace.operations(i);
    const v1::OperationPrediction& predicted = prediction.operations(i);
    int64_t ns = 0;
    Accumulate(predicted.predicted_forward_ns(), &ns);
    Accumulate(predicted.predicted_backward_ns(), &ns);
    if (IsOptimizerStep(op)) {
      Accumulate(ns, &it.optimizer_ns);
      continue;
    }
    if (!IsAccumulateGrad(op)) {
      Accumulate(predicted.predicted_forward_ns(), &it.forward_ns);
      if (position[i] >= 0) forward_slot = position[i];
      if (forward_slot >= 0) {
        Accumulate(predicted.predicted_forward_ns(), &it.forward_op_ns[forward_slot]);
      }
      if (HasRunningStats(op)) {
        it.buffers += kBuffersPerBatchNorm;
        Accumulate(GradientBytes(op.arguments(3).tensor()), &it.buffer_bytes);
        Accumulate(GradientBytes(op.arguments(4).tensor()), &it.buffer_bytes);
        Accumulate(kNumBatchesTrackedBytes, &it.buffer_bytes);
      }
      continue;
    }
    if (op.arguments_size() == 0 || !op.arguments(0).has_tensor()) continue;
    const v1::TensorArgument& param = op.arguments(0).tensor();
    const int j = GradientReadyAt(trace, op, backward_ops, position, cursor);
    ParamGradient gradient;
    gradient.bytes = GradientBytes(param);
    if (j >= 0) {
      cursor = static_cast<size_t>(j);
    } else {
      ++out.unmatched_params;
      Accumulate(gradient.bytes, &out.unmatched_bytes);
    }
    gradient.ready_after_op = static_cast<int>(cursor);
    Accumulate(gradient.bytes, &out.gradient_bytes);
    it.params.push_back(gradient);
    // Its own work (adding into an existing .grad) is part of the backward.
    if (!it.backward_op_ns.empty()) Accumulate(ns, &it.backward_op_ns[cursor]);
  }
  if (it.params.empty() || it.backward_op_ns.empty()) {
    return absl::InvalidArgumentError(
        "the trace has no gradients to all-reduce (no AccumulateGrad operations after a "
        "backward pass): data-parallel training needs a training iteration");
  }
  AddUnclaimedToForward(prediction, &it);
  return out;
}

namespace {

// The cheapest instance of exactly `gpus` of `device_id` in `catalog` with a
// price of `kind`; null if none.
const v1::GpuPrice* InstanceOf(const v1::PriceCatalog* catalog, const std::string& device_id,
                               uint32_t gpus, v1::PriceKind kind) {
  if (catalog == nullptr) return nullptr;
  const v1::GpuPrice* best = nullptr;
  for (const v1::GpuPrice& row : catalog->prices()) {
    if (row.device_id() != device_id || GpusPerInstance(row) != gpus) continue;
    if (PricePerGpuHour(row, kind) <= 0) continue;
    if (best == nullptr || PricePerGpuHour(row, kind) < PricePerGpuHour(*best, kind)) best = &row;
  }
  return best;
}

}  // namespace

absl::StatusOr<Links> LinksFor(const v1::DeviceSpec& device, const v1::ParallelConfig& config,
                               const v1::GpuPrice* instance, const std::string& catalog) {
  const v1::Interconnect& link = device.interconnect();
  if (!device.has_interconnect() || link.allreduce_busbw_gbps() <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the spec database has no interconnect figures for ", device.id(),
                     " (no published all-reduce bandwidth between these GPUs)"));
  }
  if (config.gpus_per_node() > link.max_gpus_per_node()) {
    return absl::FailedPreconditionError(absl::StrCat("a server holds at most ",
                                                      link.max_gpus_per_node(), " ", device.id(),
                                                      " (", link.link(), ")"));
  }
  Links out;
  LinkConstants& usual = out.usual;
  usual.intra_node_latency_ns = link.nvlink() ? kNvlinkRingStepNs : kPcieRingStepNs;
  usual.intra_node_busbw_gbps = link.allreduce_busbw_gbps();
  // The fill was measured on NVLink nodes; published PCIe nodes are at their
  // bandwidth from 32 MiB (docs/multi_gpu.md, section 3), so buckets of
  // DDP's size are taken at it.
  usual.fill_bytes = link.nvlink() ? kNcclFillBytes : 0;
  if (!config.disable_nvls() && link.nvls_allreduce_busbw_gbps() > 0) {
    // NVLS moves each GPU's buffer once whatever the node size: the full
    // node's bus bandwidth back to its algorithm bandwidth.
    usual.nvls_algbw_gbps = AllReduceAlgorithmBandwidthGbps(
        link.nvls_allreduce_busbw_gbps(), static_cast<int>(link.max_gpus_per_node()));
  }
  if (link.allreduce_busbw_low_gbps() > 0) {
    out.slow = usual;
    out.slow->intra_node_busbw_gbps = link.allreduce_busbw_low_gbps();
  }
  if (config.nodes() <= 1) return out;
  if (instance == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("across nodes the network comes from an instance of ", config.gpus_per_node(),
                     " x ", device.id(), ", and ",
                     catalog.empty() ? std::string("no catalog was given")
                                     : absl::StrCat("catalog '", catalog, "' has none"),
                     " with a price of that kind"));
  }
  if (instance->network_gbps() <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "catalog instance ", instance->instance_type(), " has no network figure (network_gbps)"));
  }
  // Every GPU of a node crosses the network at once (rail-optimised nodes
  // give each its NIC): the instance's bandwidth in GB/s, shared.
  const auto per_gpu = [&](double efficiency) {
    return instance->network_gbps() / 8.0 * efficiency / config.gpus_per_node();
  };
  usual.inter_node_gbps_per_gpu = per_gpu(kNetworkEfficiency);
  usual.inter_node_latency_ns = kNetworkRingStepNs;
  if (!out.slow) out.slow = usual;
  out.slow->inter_node_gbps_per_gpu = per_gpu(kNetworkEfficiencyLow);
  out.slow->inter_node_latency_ns = kNetworkRingStepNs;
  return out;
}

namespace {

// The step's timeline on `link`, DDP's constants from `device`.
absl::StatusOr<DdpStepPrediction> StepOn(const TraceIteration& iteration,
                                         const v1::DeviceSpec& device,
                                         const v1::ParallelConfig& config,
                                         const LinkConstants& link) {
  DdpConfig ddp;
  ddp.ranks_per_node = static_cast<int>(config.gpus_per_node());
  ddp.nodes = static_cast<int>(config.nodes());
  ddp.link = link;
  if (config.bucket_cap_bytes() > 0) ddp.bucket_cap_bytes = config.bucket_cap_bytes();
  ddp.per_bucket_host_ns = kDdpBucketHostNs;
  ddp.copy_back_memory_gbps = device.measured_memory_bandwidth_gbps() > 0
                                  ? device.measured_memory_bandwidth_gbps()
                                  : device.memory_bandwidth_gbps();
  ddp.per_copy_kernel_ns = device.kernel_fixed_latency_ns() > 0 ? device.kernel_fixed_latency_ns()
                                                                : kDefaultCopyKernelNs;
  return PredictDdpStep(iteration.iteration, ddp);
}

// Exposed communication of the step on `device`, and, where its bandwidth
// is known only as a range, how far the step moves between the usual and the
// slow end.
absl::StatusOr<ParallelCommunication> DdpCommunicationOn(const TraceIteration& iteration,
                                                         const v1::DeviceSpec& device,
                                                         const v1::ParallelConfig& config,
                                                         const Links& links) {
  auto usual = StepOn(iteration, device, config, links.usual);
  if (!usual.ok()) return usual.status();
  ParallelCommunication out;
  out.exposed_ns = std::max<int64_t>(0, usual->exposed_comm_ns);
  out.buckets = usual->num_buckets;
  out.added_ns = out.exposed_ns;
  if (!links.slow) return out;
  auto slowest = StepOn(iteration, device, config, *links.slow);
  if (!slowest.ok()) return slowest.status();
  // The middle of the two, so that the step's expected error covers both.
  const int64_t slow_exposed = std::max<int64_t>(out.exposed_ns, slowest->exposed_comm_ns);
  out.span_ns = slow_exposed - out.exposed_ns;
  out.exposed_ns += out.span_ns / 2;
  out.added_ns = out.exposed_ns;
  return out;
}

// Half the span of a step's bandwidth range, percent of the step.
double RangeSpanPercent(const ParallelCommunication& comm, int64_t step_ns) {
  return step_ns > 0
             ? 100.0 * static_cast<double>(comm.span_ns) / 2.0 / static_cast<double>(step_ns)
             : 0.0;
}

}  // namespace

double ParallelExpectedErrorPercent(const v1::DevicePrediction& single, uint32_t gpus,
                                    double range_span_percent, bool fsdp_host_bound) {
  const double own = std::max(0.0, single.expected_error_percent());
  if (gpus <= 1) return own;
  const double model = fsdp_host_bound       ? kFsdpHostBoundErrorPercent
                       : single.host_bound() ? kDdpHostBoundErrorPercent
                                             : kDdpErrorPercent;
  return std::sqrt(own * own + model * model + range_span_percent * range_span_percent);
}

v1::ParallelPrediction PredictParallel(const absl::StatusOr<TraceIteration>& iteration,
                                       const v1::DevicePrediction& single,
                                       const v1::DeviceSpec& device,
                                       const v1::ParallelConfig& config,
                                       const v1::PriceCatalog* catalog, v1::PriceKind kind) {
  v1::ParallelPrediction out;
  const uint32_t nodes = std::max<uint32_t>(config.nodes(), 1);
  out.set_gpus_per_node(config.gpus_per_node());
  out.set_nodes(nodes);
  v1::ParallelConfig normalised = config;
  normalised.set_nodes(nodes);
  const v1::GpuPrice* instance = InstanceOf(catalog, device.id(), config.gpus_per_node(), kind);
  const bool sharded = config.kind() == v1::ParallelConfig::KIND_FULLY_SHARDED;
  out.set_kind(config.kind());
  ParallelCommunication comm;
  if (absl::Status modelled = CheckModelledParallelism(config); !modelled.ok()) {
    out.set_unavailable(std::string(modelled.message()));
    return out;
  }
  if (GpusInAll(config) > 1) {
    if (!iteration.ok()) {
      out.set_unavailable(std::string(iteration.status().message()));
      return out;
    }
    auto links = LinksFor(device, normalised, instance, catalog == nullptr ? "" : catalog->name());
    if (!links.ok()) {
      out.set_unavailable(std::string(links.status().message()));
      return out;
    }
    auto predicted = sharded ? FsdpCommunicationOn(*iteration, device, normalised, *links)
                             : DdpCommunicationOn(*iteration, device, normalised, *links);
    if (!predicted.ok()) {
      out.set_unavailable(std::string(predicted.status().message()));
      return out;
    }
    comm = *predicted;
    out.set_buckets(static_cast<uint32_t>(comm.buckets));
    out.set_bandwidth_range(links->slow.has_value());
    const AllReduceShape node{0, static_cast<int>(config.gpus_per_node()), static_cast<int>(nodes)};
    out.set_nvls(!sharded && NvlsEligible(node, links->usual));
    out.set_fsdp_units(static_cast<uint32_t>(comm.fsdp_units));
    out.set_unsharded_in_flight_bytes(comm.unsharded_in_flight_bytes);
  }
  // What the timeline adds to the GPU step (the communication the compute
  // cannot hide; for FSDP less the optimizer work each GPU no longer does)
  // changes the step as the host replay measured it (a host-bound step may
  // in fact hide some).
  const int64_t step_ns = single.wall_time_ns() + comm.added_ns;
  out.set_step_ns(step_ns);
  out.set_expected_error_percent(ParallelExpectedErrorPercent(
      single, config.gpus_per_node() * nodes, RangeSpanPercent(comm, step_ns), comm.host_bound));
  out.set_exposed_communication_ns(comm.exposed_ns);
  out.set_scaling_efficiency(
      step_ns > 0 ? static_cast<double>(single.wall_time_ns()) / static_cast<double>(step_ns) : 0);
  const double seconds = NsToSeconds(step_ns);
  const double gpus = static_cast<double>(config.gpus_per_node()) * nodes;
  out.set_samples_per_second(seconds > 0 ? single.batch_size() * gpus / seconds : 0);
  if (instance != nullptr) {
    out.set_instance_type(instance->instance_type());
    out.set_has_price(true);
    out.set_price_per_node_hour(PricePerGpuHour(*instance, kind) * GpusPerInstance(*instance));
    if (out.samples_per_second() > 0) {
      out.set_cost_per_1000_samples(out.price_per_node_hour() * nodes / 3600.0 * 1000.0 /
                                    out.samples_per_second());
    }
  }
  return out;
}

std::vector<uint32_t> CatalogInstanceSizes(const v1::PriceCatalog& catalog,
                                           const std::string& device_id) {
  std::set<uint32_t> sizes;
  for (const v1::GpuPrice& row : catalog.prices()) {
    if (row.device_id() == device_id && GpusPerInstance(row) > 1) {
      sizes.insert(GpusPerInstance(row));
    }
  }
  return {sizes.begin(), sizes.end()};
}

}  // namespace habitat
