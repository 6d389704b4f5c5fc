#include "eval/suite/eval_row.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace habitat {
namespace eval {
namespace {

std::string Quote(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\"", "\"\""}}), "\"");
}

Nanoseconds Scale(Nanoseconds ns, double ratio) {
  return static_cast<Nanoseconds>(std::llround(static_cast<double>(ns) * ratio));
}

}  // namespace

std::string CsvHeader(bool host_speed_columns) {
  return std::string(
             "case,model,batch,precision,origin,target,"
             "origin_wall_ns,origin_busy_ns,origin_host_share,"
             "target_wall_ns,target_busy_ns,target_host_share,"
             "trace_busy_ns,origin_op_sum_ns,replayed_origin_wall_ns,replayed_origin_busy_ns,"
             "predicted_wall_ns,predicted_gpu_busy_ns,predicted_op_sum_ns,host_bound,"
             "predicted_busy_scaled_ns,"
             "same_flops_busy_ns,same_flops_wall_ns,bandwidth_busy_ns,bandwidth_wall_ns,"
             "trace_id,error") +
         (host_speed_columns ? ",origin_tag,target_tag,host_speed_hostbench,"
                               "predicted_wall_hostbench_ns,host_speed_calibrated,"
                               "predicted_wall_calibrated_ns"
                             : "");
}

std::string CsvLine(const EvalRow& r, bool host_speed_columns) {
  auto ns = [](bool present, Nanoseconds value) {
    return present ? absl::StrCat(value) : std::string();
  };
  auto share = [](bool present, double value) {
    return present ? absl::StrFormat("%.4f", value) : std::string();
  };
  const bool p = r.has_prediction;
  const bool baselines = r.same_flops_busy_ns > 0;
  std::vector<std::string> fields = {Quote(r.case_name),
                                     Quote(r.model),
                                     absl::StrCat(r.batch),
                                     Quote(r.precision),
                                     Quote(r.origin),
                                     Quote(r.target),
                                     ns(true, r.origin_wall_ns),
                                     ns(true, r.origin_busy_ns),
                                     share(true, r.origin_host_share),
                                     ns(r.has_target, r.target_wall_ns),
                                     ns(r.has_target, r.target_busy_ns),
                                     share(r.has_target, r.target_host_share),
                                     ns(r.trace_busy_ns > 0, r.trace_busy_ns),
                                     ns(r.origin_op_sum_ns > 0, r.origin_op_sum_ns),
                                     ns(p, r.replayed_origin_wall_ns),
                                     ns(p, r.replayed_origin_busy_ns),
                                     ns(p, r.predicted_wall_ns),
                                     ns(p, r.predicted_gpu_busy_ns),
                                     ns(p, r.predicted_op_sum_ns),
                                     p ? (r.host_bound ? "1" : "0") : "",
                                     ns(p, r.predicted_busy_scaled_ns),
                                     ns(baselines, r.same_flops_busy_ns),
                                     ns(baselines, r.same_flops_wall_ns),
                                     ns(baselines, r.bandwidth_busy_ns),
                                     ns(baselines, r.bandwidth_wall_ns),
                                     Quote(r.trace_id),
                                     Quote(r.error)};
  if (host_speed_columns) {
    auto speed = [](double value) {
      return value > 0 ? absl::StrFormat("%.4f", value) : std::string();
    };
    fields.push_back(Quote(r.origin_tag));
    fields.push_back(Quote(r.target_tag));
    fields.push_back(speed(r.host_speed_hostbench));
    fields.push_back(ns(r.predicted_wall_hostbench_ns > 0, r.predicted_wall_hostbench_ns));
    fields.push_back(speed(r.host_speed_calibrated));
    fields.push_back(ns(r.predicted_wall_calibrated_ns > 0, r.predicted_wall_calibrated_ns));
  }
  return absl::StrJoin(fields, ",");
}

void FillBaselines(double origin_fp32_tflops, double target_fp32_tflops,
                   double origin_bandwidth_gbps, double target_bandwidth_gbps, EvalRow& row) {
  if (!(origin_fp32_tflops > 0 && target_fp32_tflops > 0 && origin_bandwidth_gbps > 0 &&
        target_bandwidth_gbps > 0)) {
    return;
  }
  // Time scales inversely with throughput.
  const double flops = origin_fp32_tflops / target_fp32_tflops;
  const double bandwidth = origin_bandwidth_gbps / target_bandwidth_gbps;
  row.same_flops_busy_ns = Scale(row.origin_busy_ns, flops);
  row.same_flops_wall_ns = Scale(row.origin_wall_ns, flops);
  row.bandwidth_busy_ns = Scale(row.origin_busy_ns, bandwidth);
  row.bandwidth_wall_ns = Scale(row.origin_wall_ns, bandwidth);
}

void FillScaledBusy(EvalRow& row) {
  row.predicted_busy_scaled_ns =
      row.origin_op_sum_ns > 0
          ? Scale(row.origin_busy_ns, static_cast<double>(row.predicted_op_sum_ns) /
                                          static_cast<double>(row.origin_op_sum_ns))
          : 0;
}

}  // namespace eval
}  // namespace habitat
