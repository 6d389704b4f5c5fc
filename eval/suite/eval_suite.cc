// End-to-end accuracy of the service on the committed GPU captures: starts
// the real habitat-server, and for every captured case and ordered pair of
// GPUs imports the origin's Kineto fixture (with its measured unprofiled
// wall time), uploads it, asks the server to predict the other GPU (and the
// origin itself, to see the replay there) by trace id, and writes one CSV
// row per (case, direction) with the measurements on both GPUs, the
// prediction and two datasheet baselines (eval_row.h).
// eval/suite/report.py turns the CSV into docs/accuracy_e2e.md.
//
//   build/eval/suite/habitat_eval_suite --out=eval/results/h100_h200_fixtures.csv
//
// --source=agent reads the agent's own captures instead
// (tests/testdata/agent_suite/<tag>/<case>.trace.gz, binary habitat.v1.Trace,
// and <tag>/measurements.json) and adds the host-speed columns: the wall time
// predicted again with the target host's speed from the leases' host
// benchmarks (where both have them) and from the other models' traces.
//
//   habitat_eval_suite --source=agent --gpus=h100=H100-SXM,h200=H200
//       --out=eval/results/h100_h200_agent.csv
//
// A failed import, upload or prediction is written into its row's `error`
// column and the run goes on; only a server that does not start, or an
// output that cannot be written, stops it.
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/prediction_client.h"
#include "client/trace_loader.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/kineto/kineto_import.h"
#include "core/trace/trace_totals.h"
#include "eval/suite/eval_row.h"
#include "eval/suite/host_speed.h"
#include "eval/suite/measurements.h"
#include "tools/load_test/server_process.h"

ABSL_FLAG(std::string, out, "", "CSV file to write (required)");
ABSL_FLAG(std::string, server_binary, HABITAT_DEFAULT_SERVER_BINARY,
          "habitat-server to start on a free loopback port");
ABSL_FLAG(std::string, data_dir, HABITAT_DEFAULT_DATA_DIR, "--data_dir of the server");
ABSL_FLAG(std::string, models_dir, HABITAT_DEFAULT_MODELS_DIR,
          "--models_dir of the server ('none': without the kernel-varying predictor)");
ABSL_FLAG(std::string, source, "kineto",
          "kineto: torch.profiler fixtures, <testdata>/kineto/<tag>/<case>.json.gz and "
          "<testdata>/measurements/<tag>.json; agent: the agent's traces, "
          "<testdata>/<tag>/<case>.trace.gz and <testdata>/<tag>/measurements.json "
          "(testdata defaults to tests/testdata/agent_suite), with the host-speed columns");
ABSL_FLAG(std::string, testdata, HABITAT_DEFAULT_TESTDATA_DIR,
          "Directory of the captures (see --source)");
ABSL_FLAG(std::string, hostbench_metric, "tiny_mlp_adam_step_ns",
          "agent source: the hostbench_{before,after}.json number whose origin / target "
          "ratio is the hostbench host speed");
ABSL_FLAG(std::string, gpus, "h100=H100-SXM,h200=H200",
          "tag=device_id of each captured GPU; every ordered pair is evaluated");
ABSL_FLAG(std::string, cases, "", "Comma-separated case names to run (empty: all)");
ABSL_FLAG(double, target_host_speed, 0,
          "PredictRequest.target_host_speed (0: the target's host is like the origin's)");
ABSL_FLAG(double, server_start_timeout_s, 120, "How long the server may take to start");

namespace habitat {
namespace eval {
namespace {

struct Gpu {
  std::string tag, device_id;
  std::map<std::string, MeasuredCase> cases;
  // Agent source only: each case's trace (or why it could not be read),
  // Σ op CPU time of those read, and the host benchmark (nullopt: none).
  std::map<std::string, absl::StatusOr<v1::Trace>> traces;
  std::map<std::string, int64_t> op_cpu_ns;
  std::optional<double> hostbench;
};

bool AgentSource() { return absl::GetFlag(FLAGS_source) == "agent"; }

// Reads every case's agent trace of `gpu` up front: the calibrated host
// speed of one case needs the other cases of both GPUs.
absl::Status LoadAgentCaptures(const std::string& dir, Gpu& gpu) {
  for (const auto& [name, measured] : gpu.cases) {
    absl::StatusOr<v1::Trace> trace =
        LoadTraceFile(absl::StrCat(dir, "/", name, ".trace.gz"), TraceLoadOptions{});
    if (trace.ok()) gpu.op_cpu_ns[name] = SumOfOpCpuTime(*trace);
    gpu.traces.emplace(name, std::move(trace));
  }
  absl::StatusOr<double> bench = LoadHostbench(dir, absl::GetFlag(FLAGS_hostbench_metric));
  if (bench.ok()) {
    gpu.hostbench = *bench;
  } else if (!absl::IsNotFound(bench.status())) {
    return bench.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Gpu>> LoadGpus(const std::string& spec, const std::string& testdata) {
  std::vector<Gpu> gpus;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(item, '=');
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpus: \"", item, "\" is not tag=device_id"));
    }
    Gpu gpu{parts[0], parts[1], {}, {}, {}, std::nullopt};
    if (AgentSource()) {
      const std::string dir = absl::StrCat(testdata, "/", gpu.tag);
      HABITAT_ASSIGN_OR_RETURN(gpu.cases, LoadMeasurements(dir + "/measurements.json"));
      HABITAT_RETURN_IF_ERROR(LoadAgentCaptures(dir, gpu));
    } else {
      HABITAT_ASSIGN_OR_RETURN(
          gpu.cases, LoadMeasurements(absl::StrCat(testdata, "/measurements/", gpu.tag, ".json")));
    }
    gpus.push_back(std::move(gpu));
  }
  if (gpus.size() < 2) return absl::InvalidArgumentError("--gpus: name at least two GPUs");
  return gpus;
}

// The origin's Kineto fixture, imported with its measured unprofiled wall time.
absl::StatusOr<v1::Trace> ImportFixture(const std::string& testdata, const Gpu& origin,
                                        const MeasuredCase& measured) {
  HABITAT_ASSIGN_OR_RETURN(
      std::string json,
      ReadFile(absl::StrCat(testdata, "/kineto/", origin.tag, "/", measured.name, ".json.gz")));
  KinetoImportOptions options;
  options.model_name = measured.name;
  options.batch_size = measured.batch;
  HABITAT_ASSIGN_OR_RETURN(options.precision, TracePrecision(measured.precision));
  // The unprofiled median, as a user passes it (habitat --wall-ns): the
  // host model calibrates the profiled host timeline against it.
  options.iteration_wall_ns = measured.wall_ns;
  // No profiler_step: the fixtures keep GPU work of one step only (the
  // capture's kept_step), which is the last step with GPU work.
  return ImportKinetoTrace(json, options);
}

// Imports (Kineto) or takes (agent) the origin's trace, uploads it, fills
// the trace columns and returns the trace id.
absl::StatusOr<std::string> Upload(const std::string& testdata, const Gpu& origin,
                                   const MeasuredCase& measured, PredictionClient& client,
                                   EvalRow& row) {
  v1::UploadTraceRequest request;
  if (AgentSource()) {
    const absl::StatusOr<v1::Trace>& trace = origin.traces.at(measured.name);
    if (!trace.ok()) return trace.status();
    *request.mutable_trace() = *trace;
    // The agent recorded the unprofiled median already; set it from the
    // measurement anyway, as the Kineto path does, so both compare the same.
    request.mutable_trace()->set_iteration_wall_ns(measured.wall_ns);
  } else {
    HABITAT_ASSIGN_OR_RETURN(*request.mutable_trace(), ImportFixture(testdata, origin, measured));
  }
  row.trace_busy_ns = request.trace().iteration_gpu_busy_ns();
  row.origin_op_sum_ns = SumOfPassTimes(request.trace());
  HABITAT_ASSIGN_OR_RETURN(v1::UploadTraceResponse response, client.UploadTrace(request));
  return response.trace_id();
}

absl::Status Predict(PredictionClient& client, EvalRow& row) {
  v1::PredictRequest request;
  request.set_trace_id(row.trace_id);
  request.add_devices(row.target);
  request.add_devices(row.origin);
  request.set_target_host_speed(absl::GetFlag(FLAGS_target_host_speed));
  HABITAT_ASSIGN_OR_RETURN(v1::PredictResponse response, client.Predict(request));
  if (response.origin_device_id() != row.origin) {
    return absl::InternalError(
        absl::StrCat("server resolved the origin as \"", response.origin_device_id(), "\""));
  }
  const v1::DevicePrediction* on_target = nullptr;
  const v1::DevicePrediction* on_origin = nullptr;
  for (const auto& p : response.predictions()) {
    if (p.device_id() == row.target) on_target = &p;
    if (p.device_id() == row.origin) on_origin = &p;
  }
  if (on_target == nullptr || on_origin == nullptr) {
    return absl::InternalError(absl::StrCat("server answered no prediction for ",
                                            on_target == nullptr ? row.target : row.origin));
  }
  row.has_prediction = true;
  // 0 where the trace has no host timeline to replay.
  row.predicted_wall_ns = on_target->wall_time_is_gpu_time() ? 0 : on_target->wall_time_ns();
  row.predicted_gpu_busy_ns = on_target->gpu_busy_ns();
  row.predicted_op_sum_ns = on_target->gpu_time_ns();
  row.host_bound = on_target->host_bound();
  row.replayed_origin_wall_ns = on_origin->wall_time_is_gpu_time() ? 0 : on_origin->wall_time_ns();
  row.replayed_origin_busy_ns = on_origin->gpu_busy_ns();
  FillScaledBusy(row);
  return absl::OkStatus();
}

// The target's wall time predicted with the target host `speed` times as
// fast as the origin's.
absl::StatusOr<Nanoseconds> PredictWall(PredictionClient& client, const EvalRow& row,
                                        double speed) {
  v1::PredictRequest request;
  request.set_trace_id(row.trace_id);
  request.add_devices(row.target);
  request.set_target_host_speed(speed);
  HABITAT_ASSIGN_OR_RETURN(v1::PredictResponse response, client.Predict(request));
  for (const auto& p : response.predictions()) {
    if (p.device_id() == row.target) return p.wall_time_is_gpu_time() ? 0 : p.wall_time_ns();
  }
  return absl::InternalError(absl::StrCat("server answered no prediction for ", row.target));
}

// The agent source's host-speed columns; a failure goes into `error`.
absl::Status PredictWithHostSpeeds(PredictionClient& client, const Gpu& origin, const Gpu& target,
                                   EvalRow& row) {
  if (origin.hostbench.has_value() && target.hostbench.has_value()) {
    row.host_speed_hostbench = *origin.hostbench / *target.hostbench;
    HABITAT_ASSIGN_OR_RETURN(row.predicted_wall_hostbench_ns,
                             PredictWall(client, row, row.host_speed_hostbench));
  }
  const std::optional<double> calibrated =
      HostSpeedFromOtherModels(row.case_name, origin.op_cpu_ns, target.op_cpu_ns);
  if (calibrated.has_value()) {
    row.host_speed_calibrated = *calibrated;
    HABITAT_ASSIGN_OR_RETURN(row.predicted_wall_calibrated_ns,
                             PredictWall(client, row, row.host_speed_calibrated));
  }
  return absl::OkStatus();
}

absl::Status Run() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return absl::InvalidArgumentError("--out is required");
  const std::string source = absl::GetFlag(FLAGS_source);
  if (source != "kineto" && source != "agent") {
    return absl::InvalidArgumentError(
        absl::StrCat("--source: \"", source, "\" is neither kineto nor agent"));
  }
  std::string testdata = absl::GetFlag(FLAGS_testdata);
  // The agent captures live beside the Kineto ones.
  if (AgentSource() && testdata == HABITAT_DEFAULT_TESTDATA_DIR) testdata += "/agent_suite";
  HABITAT_ASSIGN_OR_RETURN(std::vector<Gpu> gpus, LoadGpus(absl::GetFlag(FLAGS_gpus), testdata));
  std::set<std::string> wanted;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_cases), ',', absl::SkipEmpty())) {
    bool known = false;
    for (const Gpu& gpu : gpus) known = known || gpu.cases.count(std::string(name)) > 0;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat("--cases: no GPU has a case \"", name, "\""));
    }
    wanted.insert(std::string(name));
  }

  HABITAT_ASSIGN_OR_RETURN(auto server,
                           load_test::ServerProcess::Start(
                               absl::GetFlag(FLAGS_server_binary),
                               {"--store=memory", "--data_dir=" + absl::GetFlag(FLAGS_data_dir),
                                "--models_dir=" + absl::GetFlag(FLAGS_models_dir)},
                               absl::Seconds(absl::GetFlag(FLAGS_server_start_timeout_s))));
  ClientOptions client_options;
  client_options.deadline = absl::Seconds(120);
  HABITAT_ASSIGN_OR_RETURN(
      auto client,
      PredictionClient::Connect(absl::StrCat("127.0.0.1:", server->port()), client_options));
  v1::ListDevicesRequest list;
  list.set_include_test_only(true);
  HABITAT_ASSIGN_OR_RETURN(v1::ListDevicesResponse devices, client->ListDevices(list));
  std::map<std::string, v1::DeviceSpec> specs;
  for (const auto& d : devices.devices()) specs[d.id()] = d;

  const bool agent = AgentSource();
  std::string csv = CsvHeader(agent) + "\n";
  int rows = 0, failed = 0;
  for (const Gpu& origin : gpus) {
    for (const Gpu& target : gpus) {
      if (origin.tag == target.tag) continue;
      for (const auto& [name, measured] : origin.cases) {
        if (!wanted.empty() && wanted.count(name) == 0) continue;
        EvalRow row;
        row.case_name = name;
        row.model = measured.model;
        row.batch = measured.batch;
        row.precision = measured.precision;
        row.origin = origin.device_id;
        row.target = target.device_id;
        if (agent) {
          row.origin_tag = origin.tag;
          row.target_tag = target.tag;
        }
        row.origin_wall_ns = measured.wall_ns;
        row.origin_busy_ns = measured.busy_ns;
        row.origin_host_share = measured.host_share;
        auto on_target = target.cases.find(name);
        if (on_target != target.cases.end()) {
          row.has_target = true;
          row.target_wall_ns = on_target->second.wall_ns;
          row.target_busy_ns = on_target->second.busy_ns;
          row.target_host_share = on_target->second.host_share;
        } else {
          row.error = absl::StrCat("not captured on ", target.device_id,
                                   agent ? absl::StrCat(" (", target.tag, ")") : "");
        }
        auto o = specs.find(origin.device_id), t = specs.find(target.device_id);
        if (o != specs.end() && t != specs.end()) {
          FillBaselines(o->second.peak_fp32_tflops(), t->second.peak_fp32_tflops(),
                        o->second.memory_bandwidth_gbps(), t->second.memory_bandwidth_gbps(), row);
        }
        absl::Status status;
        auto id = Upload(testdata, origin, measured, *client, row);
        if (id.ok()) {
          row.trace_id = *id;
          status = Predict(*client, row);
          if (status.ok() && agent) status = PredictWithHostSpeeds(*client, origin, target, row);
        } else {
          status = id.status();
        }
        if (!status.ok()) {
          const std::string what =
              absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
          row.error = row.error.empty() ? what : absl::StrCat(row.error, "; ", what);
        }
        if (!row.error.empty()) {
          ++failed;
          std::fprintf(stderr, "%s %s -> %s: %s\n", name.c_str(), row.origin.c_str(),
                       row.target.c_str(), row.error.c_str());
        }
        csv += CsvLine(row, agent) + "\n";
        ++rows;
      }
    }
  }
  HABITAT_RETURN_IF_ERROR(WriteFileAtomically(out, csv));
  std::fprintf(stderr, "wrote %d rows (%d with errors) to %s\n", rows, failed, out.c_str());
  return server->Stop(absl::Seconds(30));
}

}  // namespace
}  // namespace eval
}  // namespace habitat

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Predicts the committed H100/H200 captures through a real habitat-server; writes CSV rows");
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = habitat::eval::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "habitat_eval_suite: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
