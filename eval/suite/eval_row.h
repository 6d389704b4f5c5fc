// One row of the end-to-end evaluation CSV: a (case, origin -> target)
// pair with what was measured on both GPUs, what the server predicted and
// what two datasheet baselines predict. The column list is the file format
// that eval/suite/report.py reads.
#pragma once

#include <cstdint>
#include <string>

#include "common/time_units.h"

namespace habitat {
namespace eval {

struct EvalRow {
  std::string case_name, model;
  uint32_t batch = 0;
  std::string precision;
  std::string origin, target;  // device ids, e.g. "H100-SXM"

  // Measured medians (see measurements.h).
  Nanoseconds origin_wall_ns = 0, origin_busy_ns = 0;
  double origin_host_share = 0;
  // False when the case was not captured on the target: target columns
  // are then empty.
  bool has_target = false;
  Nanoseconds target_wall_ns = 0, target_busy_ns = 0;
  double target_host_share = 0;

  // From the imported origin trace: its GPU-busy time (the one profiled
  // step) and the sum of its operations' measured pass times.
  Nanoseconds trace_busy_ns = 0, origin_op_sum_ns = 0;
  // The server's replay of the trace on its own origin GPU: wall time
  // (calibrated to the measured one) and GPU-busy time. Shows whether the
  // replay reproduces the origin before any kernel is scaled.
  Nanoseconds replayed_origin_wall_ns = 0, replayed_origin_busy_ns = 0;

  // The server's answer; false (and `error` set) when there is none.
  bool has_prediction = false;
  Nanoseconds predicted_wall_ns = 0;      // host-timeline replay
  Nanoseconds predicted_gpu_busy_ns = 0;  // union of kernels in that replay
  Nanoseconds predicted_op_sum_ns = 0;    // gpu_time_ns: sum of op predictions
  bool host_bound = false;
  // eval/fixtures' estimate: measured origin busy x predicted op sum /
  // measured op sum.
  Nanoseconds predicted_busy_scaled_ns = 0;

  // Datasheet baselines, origin measurement x origin/target ratio of fp32
  // peak FLOPS or of memory bandwidth; 0 when the specs are unknown.
  Nanoseconds same_flops_busy_ns = 0, same_flops_wall_ns = 0;
  Nanoseconds bandwidth_busy_ns = 0, bandwidth_wall_ns = 0;

  // Agent captures only (CsvHeader(true)): the capture sets' directory
  // names (e.g. "h100_run2"), and the wall time predicted again with the
  // target host's speed from the leases' host benchmarks and from the
  // other models' traces (host_speed.h); 0 where there is none.
  std::string origin_tag, target_tag;
  double host_speed_hostbench = 0;
  Nanoseconds predicted_wall_hostbench_ns = 0;
  double host_speed_calibrated = 0;
  Nanoseconds predicted_wall_calibrated_ns = 0;

  std::string trace_id;
  // Why a prediction (or the target measurement) is missing; empty if none.
  std::string error;
};

// The header line (no newline). `host_speed_columns` appends the agent
// columns (origin_tag ... predicted_wall_calibrated_ns) after `error`, so
// the Kineto suite's files keep their format.
std::string CsvHeader(bool host_speed_columns = false);
// One line (no newline); text fields quoted per RFC 4180 when needed.
std::string CsvLine(const EvalRow& row, bool host_speed_columns = false);

// Sets the four baseline columns from the devices' datasheet numbers; leaves
// them 0 when any of the numbers is not positive.
void FillBaselines(double origin_fp32_tflops, double target_fp32_tflops,
                   double origin_bandwidth_gbps, double target_bandwidth_gbps, EvalRow& row);

// Sets predicted_busy_scaled_ns from the other columns (0 when the measured
// op sum is 0).
void FillScaledBusy(EvalRow& row);

}  // namespace eval
}  // namespace habitat
