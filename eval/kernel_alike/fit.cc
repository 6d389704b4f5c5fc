#include "eval/kernel_alike/fit.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/stats.h"

namespace habitat::eval {
namespace {

constexpr size_t kFloorConfigs = 30;
constexpr double kClearOfFloor = 3.0;
constexpr int kMinLineRows = 20;

int64_t TotalBytes(const Config& c) {
  const DramTraffic t = AnalyticDramTraffic(c);
  return t.read_bytes + t.write_bytes;
}

struct Line {
  double slope = 0;
  double intercept = 0;
};

// Least squares y = slope x + intercept with weights 1/y^2 (relative error).
struct LineFit {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  void Add(double x, double y) {
    const double w = 1.0 / (y * y);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
    ++n;
  }
  Line Solve() const {
    const double det = sw * sxx - sx * sx;
    Line l;
    l.slope = (sw * sxy - sx * sy) / det;
    l.intercept = (sy - l.slope * sx) / sw;
    return l;
  }
};

}  // namespace

bool IsStreamingOp(const std::string& op) { return op != "ln" && op != "softmax"; }

absl::StatusOr<std::map<std::string, FittedConstants>> FitConstants(
    const std::vector<const JoinedRow*>& rows, const std::vector<std::string>& device_ids) {
  std::map<std::string, std::vector<const JoinedRow*>> by_op;
  for (const JoinedRow* r : rows) by_op[r->config.op].push_back(r);
  for (auto& [op, list] : by_op) {
    std::sort(list.begin(), list.end(), [](const JoinedRow* a, const JoinedRow* b) {
      return TotalBytes(a->config) < TotalBytes(b->config);
    });
  }
  std::map<std::string, FittedConstants> out;
  for (const std::string& id : device_ids) {
    FittedConstants f;
    std::vector<double> floors;
    for (const auto& [op, list] : by_op) {
      std::vector<double> smallest;
      for (size_t i = 0; i < list.size() && i < kFloorConfigs; ++i) {
        smallest.push_back(list[i]->by_device.at(id).latency_ms * 1e6);
      }
      floors.push_back(Median(smallest));
    }
    if (floors.empty()) {
      return absl::InvalidArgumentError("no rows to fit the floor on");
    }
    const double floor_ns = Median(floors);
    f.op_latency_floor_ns = std::llround(floor_ns);
    f.floor_ops = static_cast<int>(floors.size());

    LineFit fit;
    for (const JoinedRow* r : rows) {
      if (!IsStreamingOp(r->config.op)) continue;
      const double y = r->by_device.at(id).latency_ms * 1e6;
      if (y <= kClearOfFloor * floor_ns) continue;
      fit.Add(static_cast<double>(TotalBytes(r->config)), y);
    }
    f.line_rows = fit.n;
    if (f.line_rows < kMinLineRows) {
      return absl::InvalidArgumentError(absl::StrCat(
          id, ": only ", f.line_rows, " streaming rows clear of the floor to fit bandwidth on"));
    }
    const Line line = fit.Solve();  // ns per byte, ns
    if (!(line.slope > 0)) {
      return absl::InternalError(absl::StrCat(id, ": fitted slope is not positive"));
    }
    f.streaming_bandwidth_gbps = 1.0 / line.slope;  // bytes/ns = GB/s
    f.op_fixed_latency_ns = std::max<int64_t>(0, std::llround(line.intercept));
    out[id] = f;
  }
  return out;
}

absl::StatusOr<KernelLine> FitKernelDurationLine(const std::vector<const JoinedRow*>& rows,
                                                 const std::string& device_id, int64_t min_bytes) {
  LineFit fit;
  std::map<std::string, std::vector<std::pair<int64_t, double>>> by_op;
  for (const JoinedRow* r : rows) {
    auto it = r->by_device.find(device_id);
    if (it == r->by_device.end() || !(it->second.kernel_duration_ms > 0)) continue;
    const int64_t bytes = TotalBytes(r->config);
    const double ns = it->second.kernel_duration_ms * 1e6;
    by_op[r->config.op].push_back({bytes, ns});
    if (IsStreamingOp(r->config.op) && bytes > min_bytes) fit.Add(bytes, ns);
  }
  if (fit.n < kMinLineRows) {
    return absl::InvalidArgumentError(absl::StrCat(device_id, ": only ", fit.n,
                                                   " streaming rows with kernel durations above ",
                                                   min_bytes, " bytes"));
  }
  const Line line = fit.Solve();
  if (!(line.slope > 0)) {
    return absl::InternalError(absl::StrCat(device_id, ": fitted slope is not positive"));
  }
  std::vector<double> floors;
  for (auto& [op, list] : by_op) {
    std::sort(list.begin(), list.end());
    std::vector<double> smallest;
    for (size_t i = 0; i < list.size() && i < kFloorConfigs; ++i) {
      smallest.push_back(list[i].second);
    }
    floors.push_back(Median(smallest));
  }
  KernelLine k;
  k.streaming_bandwidth_gbps = 1.0 / line.slope;
  k.kernel_fixed_latency_ns = std::llround(Median(floors));
  k.line_intercept_ns = std::llround(line.intercept);
  k.rows = fit.n;
  return k;
}

}  // namespace habitat::eval
