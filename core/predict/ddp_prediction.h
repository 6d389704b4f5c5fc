// Data-parallel (DDP; FSDP through fsdp_prediction.h) steps of a predicted
// trace: the single-GPU iteration they overlap with, read from a trace and
// its per-operation predictions on one GPU, and the DDP step on N of that
// GPU (core/parallel/ddp_timeline.h).
//
// The trace has no per-parameter record; what it has suffices:
//   * each parameter's gradient is an AccumulateGrad operation, in the order
//     autograd made them ready, whose argument is the parameter (its shape
//     and dtype give the bytes DDP all-reduces);
//   * backward passes run in about the reverse order of their forward
//     operations, so the AccumulateGrad of a parameter follows the backward
//     pass of the last forward operation (in backward order, the first)
//     that took a tensor of its shape.
// Optimizer work (torch's foreach kernels, "Optimizer." ranges) runs after
// the last all-reduce; everything else forward or backward as recorded.
// The buffers DDP broadcasts are those of each aten::batch_norm with running
// statistics (three each); a trace without argument shapes (a Kineto
// profile without record_shapes) shows none, and the broadcast is left out.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/parallel/ddp_timeline.h"
#include "habitat/v1/device.pb.h"
#include "habitat/v1/prediction_service.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// Every GPU of a ParallelConfig or ParallelPrediction: GPUs per node times
// nodes, where 0 nodes means 1.
template <typename Config>
uint32_t GpusInAll(const Config& config) {
  return config.gpus_per_node() * std::max<uint32_t>(config.nodes(), 1);
}

struct TraceIteration {
  SingleGpuIteration iteration;
  // AccumulateGrad operations whose shape no backward operation took (their
  // gradient is taken as ready where the previous one was), and their bytes.
  int unmatched_params = 0;
  int64_t unmatched_bytes = 0;
  // Sum of the parameters' gradient bytes.
  int64_t gradient_bytes = 0;
  // The host timeline is an FSDP rank's: FSDP2's own host work is in it.
  bool fsdp_host_work_traced = false;
  // The trace's modules (Trace.modules), for FSDP units by module class.
  google::protobuf::RepeatedPtrField<habitat::v1::Module> modules;
};

// `prediction` must hold the per-operation breakdown of `trace`
// (include_breakdown). INVALID_ARGUMENT when it does not match the trace or
// the trace has no AccumulateGrad (an inference trace: nothing to reduce).
absl::StatusOr<TraceIteration> IterationFromTrace(const habitat::v1::Trace& trace,
                                                  const habitat::v1::DevicePrediction& prediction);

// Latency of one ring step, by link, for NCCL's Simple protocol (what
// buckets of megabytes use): NVIDIA NCCL's tuning model, hwLat Ring/Simple
// in src/graph/tuning.cc (commit 01afd20: NVLink 3.4 us, PCI 5.7 us, network
// 9.6 us).
inline constexpr int64_t kNvlinkRingStepNs = 3400;
inline constexpr int64_t kPcieRingStepNs = 5700;
inline constexpr int64_t kNetworkRingStepNs = 9600;

// Share of a NIC's line rate NCCL's all-reduce reaches across nodes: 24 GB/s
// per 200 Gb/s NIC (nccl-tests issue 119), 46-48 GB/s per 400 Gb/s NDR NIC
// (nccl-tests issue 290): 0.92-0.96 (docs/multi_gpu.md, section 3).
inline constexpr double kNetworkEfficiency = 0.94;
// The lowest share published for a cloud fabric at large messages: 0.66 on
// GCP a3-highgpu-8g (NCCL_ALGO=Ring across 2 nodes, 65.72 GB/s busbw at
// 2 GB on 100 GB/s of NICs; skypilot's examples/gcp_gpu_direct_tcpx) and
// 0.70 on 8 AWS p5 nodes (279.78 GB/s at 4 GB on 400 GB/s; pytorch issue
// 117748). Across nodes a step spans both shares (ParallelPrediction.
// bandwidth_range).
inline constexpr double kNetworkEfficiencyLow = 0.66;

// Host time from a bucket's last gradient to its all-reduce's launch: what a
// lone torch.distributed all-reduce call took on an H100 host
// (docs/multi_gpu.md, section 1; eval/multi_gpu/results).
inline constexpr int64_t kDdpBucketHostNs = 30'000;

// GPU time of one small copy kernel on GPUs without a measured
// kernel_fixed_latency_ns: near the H100's and H200's
// (data/devices.textproto) and what each kernel DDP added to a step on 2
// and 4 H100s took (docs/multi_gpu.md, section 5). Older GPUs' small
// kernels are not measured here; they are not faster than Hopper's.
inline constexpr int64_t kDefaultCopyKernelNs = 1500;

// How far measured data-parallel steps were from predicted ones when the
// origin was the target (eval/multi_gpu/compare.py on 2 and 4 H100s and
// H200s: results/compare_2026-11-28.md and compare_h200_2026-11-28.md,
// "expected error"), the larger of the two GPUs' MAPE, apart for steps
// whose predicted single-GPU iteration is host-bound
// (DevicePrediction.host_bound); the figures: docs/multi_gpu.md, "Expected
// error of a step". Both move with DDP's host work (hooks, copies,
// launches; not modelled: eval/multi_gpu/ddp_host_cost.py) and the host's
// own noise.
inline constexpr double kDdpErrorPercent = 12.0;
inline constexpr double kDdpHostBoundErrorPercent = 20.0;
// An FSDP step whose timeline the host sets (FsdpStepPrediction.host_wait_ns
// over kHostBoundIdleShare of it): FSDP2's host work per unit, taken at
// kFsdpHostNsPerUnit, measured 2.5-3.5 ms a block on one 2 x H200 lease and
// about 4.1 on a 4 x H200 one (+-25 % about it), on top of the host-bound
// single-GPU step's error (kDdpHostBoundErrorPercent); the steps of both
// leases were -33 to +4 % off (docs/multi_gpu.md, section 6).
inline constexpr double kFsdpHostBoundErrorPercent = 30.0;

// Expected absolute error of a data-parallel step, percent: the GPU's own
// expected error, the data-parallel model's above (for an FSDP step the
// host sets, `fsdp_host_bound`, kFsdpHostBoundErrorPercent) and, where the
// bandwidth is known only as a range (a PCIe link's is the server's, a
// network's the fabric's), half the span of the step between its usual and
// its lowest published end (percent of the step), as independent errors
// (root of the sum of squares). With one GPU in all, the GPU's own.
double ParallelExpectedErrorPercent(const habitat::v1::DevicePrediction& single, uint32_t gpus,
                                    double range_span_percent = 0, bool fsdp_host_bound = false);

// The links of a configuration on a GPU, the network from its catalog
// instance: the usual one and, where the bandwidth is known only as a range,
// the slow end (a PCIe link at the lowest node published for it,
// Interconnect.allreduce_busbw_low_gbps; a network at kNetworkEfficiencyLow
// of its line rate).
struct Links {
  LinkConstants usual;
  std::optional<LinkConstants> slow;
};

// FAILED_PRECONDITION saying what data is missing; `instance` may be null
// (then more than one node cannot be predicted), `catalog` is its name.
absl::StatusOr<Links> LinksFor(const habitat::v1::DeviceSpec& device,
                               const habitat::v1::ParallelConfig& config,
                               const habitat::v1::GpuPrice* instance, const std::string& catalog);

// What communication does to one step of either kind, on the usual links
// and, where the bandwidth is a range, the middle of its two ends.
struct ParallelCommunication {
  // Added to the single-GPU GPU step: DDP's exposed communication and
  // copies; for FSDP also less the optimizer's share each GPU no longer
  // runs, so it may be negative.
  int64_t added_ns = 0;
  // Communication the compute does not hide.
  int64_t exposed_ns = 0;
  // How far added_ns moves between the usual and the slow end.
  int64_t span_ns = 0;
  int buckets = 0;     // DDP
  int fsdp_units = 0;  // FSDP
  int64_t unsharded_in_flight_bytes = 0;
  // FSDP: the host sets the step's pace (FsdpStepPrediction.host_wait_ns).
  bool host_bound = false;
};

// DevicePrediction.parallel for one configuration on `device`:
// `single` is the GPU's prediction (batch_size and wall time set) and
// `iteration` what IterationFromTrace read from it (an error status is
// reported as `unavailable`); `catalog` (may be null) prices the node and,
// across nodes, gives the network. A configuration the data cannot support
// comes back with `unavailable` saying why.
habitat::v1::ParallelPrediction PredictParallel(const absl::StatusOr<TraceIteration>& iteration,
                                                const habitat::v1::DevicePrediction& single,
                                                const habitat::v1::DeviceSpec& device,
                                                const habitat::v1::ParallelConfig& config,
                                                const habitat::v1::PriceCatalog* catalog,
                                                habitat::v1::PriceKind kind);

// The multi-GPU instance sizes `catalog` offers `device_id` in, ascending.
std::vector<uint32_t> CatalogInstanceSizes(const habitat::v1::PriceCatalog& catalog,
                                           const std::string& device_id);

}  // namespace habitat
