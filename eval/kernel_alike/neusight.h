// Reads the NeuSight cross-GPU operator measurements
// (../shared/data/neusight/ops/<op>/<GPU>.csv.gz) and joins them across GPUs
// on the configuration (OPName, B, H).
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "habitat/v1/device.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat::eval {

// The kernel-alike operators of the data set (elementwise, layer norm,
// softmax); each has configuration columns B and H.
const std::vector<std::string>& KernelAlikeOps();

// One measured row: the operator's latency and its dominant kernel's launch.
struct Measurement {
  double latency_ms = 0;
  // The kernel's own GPU time (CUPTI), where the file has a "Kernel
  // Duration" column (files written by measure_ops.py); else 0.
  double kernel_duration_ms = 0;
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  // Rows measured more than once are averaged; this counts them.
  int repeats = 0;
};

struct Config {
  std::string op;
  int64_t b = 0;
  int64_t h = 0;
  bool operator<(const Config& o) const { return std::tie(op, b, h) < std::tie(o.op, o.b, o.h); }
};

// One configuration measured on every GPU (device id -> measurement).
struct JoinedRow {
  Config config;
  std::map<std::string, Measurement> by_device;
};

// Splits one CSV line (RFC 4180 quoting: "a,b" and "" inside quotes).
absl::StatusOr<std::vector<std::string>> SplitCsvLine(absl::string_view line);

// Parses one file's text; `source` names it in errors. The device column is
// resolved to a DeviceSpec id through `devices`' driver_names.
absl::StatusOr<std::map<Config, Measurement>> ParseNeuSightCsv(
    absl::string_view text, absl::string_view source, const habitat::v1::DeviceDatabase& devices,
    std::string* device_id);

// Loads every file of `ops` under each of `data_dirs`/ops (NeuSight's data
// set, measure_ops.py output, or both: then our Hopper rows join NeuSight's
// older GPUs on the same configurations) and keeps the configurations
// measured on all GPUs found. `device_ids` receives the GPUs in a stable
// order.
absl::StatusOr<std::vector<JoinedRow>> LoadJoined(const std::vector<std::string>& data_dirs,
                                                  const std::vector<std::string>& ops,
                                                  const habitat::v1::DeviceDatabase& devices,
                                                  std::vector<std::string>* device_ids);

// DRAM bytes the operator's kernel must move, fp32, each tensor read or
// written once: binary ops read two B x H inputs and write one (12 B per
// element), unary and tensor-scalar ops read one and write one (8 B),
// layer norm also reads gamma and beta (H each) and writes mean and rstd
// (B each). These stand in for the DRAM counters the data set lacks.
struct DramTraffic {
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
};
DramTraffic AnalyticDramTraffic(const Config& config);

// The measurement as a trace kernel. Registers and shared memory are not
// in the data; they are left 0 (unknown), so occupancy is limited by
// threads and blocks only (see docs/kernel_alike_accuracy.md).
// `kernel_duration`: use the CUPTI kernel duration instead of the latency.
habitat::v1::Kernel ToKernel(const Config& config, const Measurement& m, bool with_counters,
                             bool kernel_duration = false);

}  // namespace habitat::eval
