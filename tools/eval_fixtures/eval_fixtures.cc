// Predicts each captured fixture from one real GPU to the other (H100 <-> H200)
// and compares with the GPU-busy time measured there. Prints a Markdown
// table for docs/accuracy.md.
//
//   build/tools/eval_fixtures/habitat_eval_fixtures
//       --testdata=tests/testdata --devices=data/devices.textproto
//
// Predicted busy time = measured origin busy time x (sum of predicted op
// times / sum of measured op times): the per-op ratio carries the
// prediction, and the measured busy time already accounts for overlap
// between kernels, which a plain sum of op times would not.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/file_io.h"
#include "core/devices/device_database.h"
#include "core/kineto/kineto_import.h"
#include "core/predict/host_replay.h"
#include "core/predict/prediction_engine.h"
#include "core/predict/varying_predictor.h"
#include "core/trace/trace_totals.h"
#include "nlohmann/json.hpp"
#include "tools/eval_suite/host_speed.h"

ABSL_FLAG(std::string, testdata, "tests/testdata", "tests/testdata directory");
ABSL_FLAG(std::string, devices, "data/devices.textproto", "GPU spec database");
ABSL_FLAG(std::string, models_dir, "models",
          "Directory with kernel_varying/ (the trained predictor); 'none' carries "
          "kernel-varying operations over unscaled, as before the predictor existed");

namespace habitat {
namespace {

struct Case {
  std::string name;
  uint32_t batch = 0;
  int64_t busy_ns = 0;
  int64_t wall_ns = 0;
  double host_share = 0;
};

std::map<std::string, Case> LoadMeasurements(const std::string& path) {
  std::map<std::string, Case> cases;
  auto text = ReadFile(path);
  if (!text.ok()) {
    std::fprintf(stderr, "%s\n", std::string(text.status().message()).c_str());
    std::exit(1);
  }
  auto doc = nlohmann::json::parse(*text);
  for (const auto& c : doc.at("cases")) {
    Case out;
    out.name = c.at("case").get<std::string>();
    out.batch = c.at("batch_size").get<uint32_t>();
    out.busy_ns = c.at("gpu_busy_ns_median").get<int64_t>();
    out.wall_ns = c.at("wall_ns_median").get<int64_t>();
    out.host_share = c.at("host_share").get<double>();
    cases[out.name] = out;
  }
  return cases;
}

struct WallRow {
  std::string name, direction;
  int64_t origin_wall, target_wall, predicted_wall;
  double target_host_share;
  bool flagged_host_bound;
  // With the target host's speed estimated from the other models' cases.
  int64_t predicted_wall_host_speed = 0;
  double host_speed = 1.0;
};

struct Errors {
  std::vector<double> habitat, same_flops, bandwidth;
  void Add(double predicted, double flops, double bw, double measured) {
    habitat.push_back(std::abs(predicted - measured) / measured);
    same_flops.push_back(std::abs(flops - measured) / measured);
    bandwidth.push_back(std::abs(bw - measured) / measured);
  }
};

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : 100.0 * sum / v.size();
}

int Run() {
  const std::string testdata = absl::GetFlag(FLAGS_testdata);
  auto devices = DeviceDatabase::LoadFromFile(absl::GetFlag(FLAGS_devices));
  if (!devices.ok()) {
    std::fprintf(stderr, "%s\n", std::string(devices.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<VaryingPredictor> varying;
  if (absl::GetFlag(FLAGS_models_dir) != "none") {
    auto loaded =
        VaryingPredictor::Load(absl::GetFlag(FLAGS_models_dir) + "/kernel_varying", 1 << 16);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
      return 1;
    }
    varying = std::move(*loaded);
  }
  const std::map<std::string, std::string> gpu_ids = {{"h100", "H100-SXM"}, {"h200", "H200"}};
  std::map<std::string, std::map<std::string, Case>> measured;
  for (const auto& [tag, id] : gpu_ids) {
    measured[tag] = LoadMeasurements(testdata + "/measurements/" + tag + ".json");
  }
  // Host CPU time of every fixture, per GPU tag, for the host-speed estimate.
  std::map<std::string, std::map<std::string, int64_t>> cpu_time;
  for (const auto& [tag, id] : gpu_ids) {
    for (const auto& [name, c] : measured[tag]) {
      auto json = ReadFile(testdata + "/kineto/" + tag + "/" + name + ".json.gz");
      if (!json.ok()) continue;
      KinetoImportOptions options;
      options.batch_size = c.batch;
      auto trace = ImportKinetoTrace(*json, options);
      if (trace.ok()) cpu_time[tag][name] = eval::SumOfOpCpuTime(*trace);
    }
  }
  std::printf(
      "| case | direction | measured origin busy ms | measured target busy ms | "
      "predicted ms | error %% | same-FLOPS error %% | bandwidth-ratio error %% | "
      "share unscaled %% |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  std::map<std::string, Errors> errors_by_direction;
  std::vector<WallRow> walls;
  for (const auto& [origin_tag, origin_id] : gpu_ids) {
    for (const auto& [target_tag, target_id] : gpu_ids) {
      if (origin_tag == target_tag) continue;
      const auto& origin_spec = **devices->Get(origin_id);
      const auto& target_spec = **devices->Get(target_id);
      const std::string direction = origin_id + " -> " + target_id;
      for (const auto& [name, origin_case] : measured[origin_tag]) {
        auto target_it = measured[target_tag].find(name);
        if (target_it == measured[target_tag].end()) {
          std::printf("| %s | %s | | | | not captured on %s | | | |\n", name.c_str(),
                      direction.c_str(), target_id.c_str());
          continue;
        }
        auto json = ReadFile(testdata + "/kineto/" + origin_tag + "/" + name + ".json.gz");
        KinetoImportOptions options;
        options.model_name = name;
        options.batch_size = origin_case.batch;
        // The unprofiled median, as a user passes it (--wall-ns): the host
        // model calibrates the profiled host timeline against it.
        options.iteration_wall_ns = origin_case.wall_ns;
        // The fixtures' names say how they ran: bf16 ones under autocast.
        options.precision =
            absl::StrContains(name, "_bf16") ? v1::PRECISION_AMP_BF16 : v1::PRECISION_FP32;
        auto trace = json.ok() ? ImportKinetoTrace(*json, options)
                               : absl::StatusOr<v1::Trace>(json.status());
        if (!trace.ok()) {
          std::printf("| %s | %s | | | | import failed: %s | | | |\n", name.c_str(),
                      direction.c_str(), std::string(trace.status().message()).c_str());
          continue;
        }
        absl::StatusOr<std::vector<VaryingPassTable>> tables = std::vector<VaryingPassTable>(1);
        if (varying != nullptr) tables = varying->PredictTrace(*trace, origin_spec, {&target_spec});
        auto prediction = tables.ok()
                              ? PredictOnDevice(*trace, origin_spec, target_spec, std::nullopt,
                                                varying != nullptr ? &(*tables)[0] : nullptr)
                              : absl::StatusOr<v1::DevicePrediction>(tables.status());
        if (!prediction.ok()) {
          std::printf("| %s | %s | | | | predict failed: %s | | | |\n", name.c_str(),
                      direction.c_str(), std::string(prediction.status().message()).c_str());
          continue;
        }
        const double origin_sum = static_cast<double>(SumOfPassTimes(*trace));
        const double ratio = static_cast<double>(prediction->gpu_time_ns()) / origin_sum;
        const double predicted = origin_case.busy_ns * ratio;
        const double same_flops =
            origin_case.busy_ns * origin_spec.peak_fp32_tflops() / target_spec.peak_fp32_tflops();
        const double bandwidth = origin_case.busy_ns * origin_spec.memory_bandwidth_gbps() /
                                 target_spec.memory_bandwidth_gbps();
        const double target_busy = static_cast<double>(target_it->second.busy_ns);
        double unscaled = 0;
        for (const auto& total : prediction->method_totals()) {
          if (total.method() == v1::PREDICTION_METHOD_UNSCALED) unscaled += total.predicted_ns();
        }
        errors_by_direction[direction].Add(predicted, same_flops, bandwidth, target_busy);
        if (prediction->wall_ns() > 0) {
          WallRow row{name,
                      direction,
                      origin_case.wall_ns,
                      target_it->second.wall_ns,
                      prediction->wall_ns(),
                      target_it->second.host_share,
                      prediction->host_bound()};
          const std::optional<double> speed =
              eval::HostSpeedFromOtherModels(name, cpu_time[origin_tag], cpu_time[target_tag]);
          const std::optional<double> host_scale = HostScaleFor(*trace);
          if (speed.has_value() && host_scale.has_value()) {
            auto with_speed =
                PredictOnDevice(*trace, origin_spec, target_spec, *host_scale / *speed,
                                varying != nullptr ? &(*tables)[0] : nullptr);
            if (with_speed.ok() && with_speed->wall_ns() > 0) {
              row.predicted_wall_host_speed = with_speed->wall_ns();
              row.host_speed = *speed;
            }
          }
          walls.push_back(row);
        }
        std::printf("| %s | %s | %.2f | %.2f | %.2f | %+.1f | %+.1f | %+.1f | %.0f |\n",
                    name.c_str(), direction.c_str(), origin_case.busy_ns / 1e6, target_busy / 1e6,
                    predicted / 1e6, 100.0 * (predicted - target_busy) / target_busy,
                    100.0 * (same_flops - target_busy) / target_busy,
                    100.0 * (bandwidth - target_busy) / target_busy,
                    100.0 * unscaled / prediction->gpu_time_ns());
      }
    }
  }
  std::printf(
      "\n| direction | cases | Habitat (this build) MAPE %% | same-FLOPS MAPE %% | "
      "bandwidth-ratio MAPE %% |\n|---|---:|---:|---:|---:|\n");
  for (const auto& [direction, errors] : errors_by_direction) {
    std::printf("| %s | %zu | %.1f | %.1f | %.1f |\n", direction.c_str(), errors.habitat.size(),
                Mean(errors.habitat), Mean(errors.same_flops), Mean(errors.bandwidth));
  }
  std::printf(
      "\n### Wall time (host model)\n\n| case | direction | measured origin wall ms | "
      "measured target wall ms | target host share %% | predicted wall ms | error %% | "
      "flagged host-bound | host speed (other models) | predicted wall ms with it | "
      "error %% |\n|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|\n");
  std::map<std::string, std::vector<double>> gpu_bound_errors, host_bound_errors;
  std::map<std::string, std::vector<double>> gpu_bound_speed_errors, host_bound_speed_errors;
  for (const auto& w : walls) {
    const double error = (static_cast<double>(w.predicted_wall) - w.target_wall) / w.target_wall;
    const bool gpu_bound = w.target_host_share < habitat::kHostBoundIdleShare;
    (gpu_bound ? gpu_bound_errors : host_bound_errors)[w.direction].push_back(std::abs(error));
    const double speed_error =
        w.predicted_wall_host_speed > 0
            ? (static_cast<double>(w.predicted_wall_host_speed) - w.target_wall) / w.target_wall
            : error;
    (gpu_bound ? gpu_bound_speed_errors : host_bound_speed_errors)[w.direction].push_back(
        std::abs(speed_error));
    std::printf("| %s | %s | %.2f | %.2f | %.0f | %.2f | %+.1f | %s | %.2f | %.2f | %+.1f |\n",
                w.name.c_str(), w.direction.c_str(), w.origin_wall / 1e6, w.target_wall / 1e6,
                100.0 * w.target_host_share, w.predicted_wall / 1e6, 100.0 * error,
                w.flagged_host_bound ? "yes" : "no", w.host_speed,
                w.predicted_wall_host_speed / 1e6, 100.0 * speed_error);
  }
  std::printf(
      "\n| direction | GPU-bound cases (host share < %.0f%%) | wall MAPE %% | with host "
      "speed %% | host-bound cases | wall MAPE %% | with host speed %% |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n",
      100.0 * habitat::kHostBoundIdleShare);
  for (const auto& [direction, errors] : errors_by_direction) {
    std::printf("| %s | %zu | %.1f | %.1f | %zu | %.1f | %.1f |\n", direction.c_str(),
                gpu_bound_errors[direction].size(), Mean(gpu_bound_errors[direction]),
                Mean(gpu_bound_speed_errors[direction]), host_bound_errors[direction].size(),
                Mean(host_bound_errors[direction]), Mean(host_bound_speed_errors[direction]));
  }
  return 0;
}

}  // namespace
}  // namespace habitat

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return habitat::Run();
}
