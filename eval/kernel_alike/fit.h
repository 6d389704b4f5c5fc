// Fits the per-GPU kernel-scaling constants (DeviceSpec fields 40-42) to
// host-timed operator latencies: streaming bandwidth and fixed latency from
// a weighted least-squares line of latency against DRAM bytes, and the floor
// from the smallest configurations.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "eval/kernel_alike/neusight.h"

namespace habitat::eval {

struct FittedConstants {
  double streaming_bandwidth_gbps = 0;
  int64_t op_fixed_latency_ns = 0;
  int64_t op_latency_floor_ns = 0;
  int line_rows = 0;  // rows the bandwidth/fixed line was fitted on
  int floor_ops = 0;  // operators whose floors were pooled
};

// Only these are streaming kernels (one pass over the data, no reduction):
// the line is fitted on them. Layer norm and softmax count for the floor.
bool IsStreamingOp(const std::string& op);

// Fits each GPU in `device_ids` on `rows`:
// - floor: for each operator, the median latency of its 30 configurations
//   with the fewest bytes; the GPU's floor is the median over operators;
// - line: latency = fixed + bytes / bandwidth over streaming-op rows whose
//   latency is above 3x the floor (clear of it), weighted by 1/latency^2 so
//   that relative error is minimised.
absl::StatusOr<std::map<std::string, FittedConstants>> FitConstants(
    const std::vector<const JoinedRow*>& rows, const std::vector<std::string>& device_ids);

// Kernel-duration basis (CUPTI times, "Kernel Duration" column):
// - bandwidth: the same weighted line over streaming-op rows moving more
//   than `min_bytes` (chosen well above the L2 size, so that repeated runs do
//   not hit in L2);
// - kernel_fixed_latency_ns: the duration of a kernel doing almost no work,
//   pooled like the host floor (median over operators of the median of each
//   one's 30 smallest configurations). Not the line's intercept: that is
//   larger (2.1-2.9 us against 1.2-1.5 us on Hopper) because mid-size
//   working sets are served from L2, which bends the curve below the line.
struct KernelLine {
  double streaming_bandwidth_gbps = 0;
  int64_t kernel_fixed_latency_ns = 0;
  int64_t line_intercept_ns = 0;  // for the record only
  int rows = 0;
};
absl::StatusOr<KernelLine> FitKernelDurationLine(const std::vector<const JoinedRow*>& rows,
                                                 const std::string& device_id, int64_t min_bytes);

}  // namespace habitat::eval
