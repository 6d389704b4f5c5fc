#include "tools/eval_kernel_alike/fit.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace habitat::eval {
namespace {

constexpr size_t kFloorConfigs = 30;
constexpr double kClearOfFloor = 3.0;
constexpr int kMinLineRows = 20;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int64_t TotalBytes(const Config& c) {
  const DramTraffic t = AnalyticDramTraffic(c);
  return t.read_bytes + t.write_bytes;
}

}  // namespace

bool IsStreamingOp(const std::string& op) { return op != "ln" && op != "softmax"; }

absl::StatusOr<std::map<std::string, FittedConstants>> FitConstants(
    const std::vector<const JoinedRow*>& rows,
    const std::vector<std::string>& device_ids) {
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

    // Weighted least squares for y = a x + c (y ns, x bytes), weight 1/y^2.
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const JoinedRow* r : rows) {
      if (!IsStreamingOp(r->config.op)) continue;
      const double y = r->by_device.at(id).latency_ms * 1e6;
      if (y <= kClearOfFloor * floor_ns) continue;
      const double x = static_cast<double>(TotalBytes(r->config));
      const double w = 1.0 / (y * y);
      sw += w;
      sx += w * x;
      sy += w * y;
      sxx += w * x * x;
      sxy += w * x * y;
      ++f.line_rows;
    }
    if (f.line_rows < kMinLineRows) {
      return absl::InvalidArgumentError(absl::StrCat(
          id, ": only ", f.line_rows,
          " streaming rows clear of the floor to fit bandwidth on"));
    }
    const double det = sw * sxx - sx * sx;
    const double slope = (sw * sxy - sx * sy) / det;  // ns per byte
    const double intercept = (sy - slope * sx) / sw;
    if (!(slope > 0)) {
      return absl::InternalError(absl::StrCat(id, ": fitted slope is not positive"));
    }
    f.streaming_bandwidth_gbps = 1.0 / slope;  // bytes/ns = GB/s
    f.op_fixed_latency_ns = std::max<int64_t>(0, std::llround(intercept));
    out[id] = f;
  }
  return out;
}

}  // namespace habitat::eval
