// Load test of habitat-server: uploads a trace once, then drives warm
// Predict calls (by trace id, every GPU, with prices) at saturation on
// loopback and reports calls/s, latency percentiles, errors and the
// server's memory (docs/benchmarks.md, "Load test"). A server it starts
// loads the kernel-varying predictor (--server_models_dir). Exits non-zero
// on any error or when --min_rps is not reached.
//
//   habitat_load_test --server_binary=build/server/habitat-server --duration_s=60
//   habitat_load_test --address=127.0.0.1:50051 --server_pid=1234
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/prediction_client.h"
#include "client/trace_loader.h"
#include "tools/load_test/load_generator.h"
#include "tools/load_test/server_process.h"

ABSL_FLAG(std::string, server_binary, "",
          "habitat-server to start on a free loopback port (else use --address)");
ABSL_FLAG(std::string, server_args, "", "Extra flags for --server_binary, separated by spaces");
ABSL_FLAG(std::string, server_store, "sqlite",
          "Trace store of --server_binary: sqlite (a database in a temporary directory, "
          "removed afterwards), memory, or empty (the server's default)");
ABSL_FLAG(std::string, server_models_dir, HABITAT_DEFAULT_MODELS_DIR,
          "--models_dir of --server_binary (default: the source tree's models/, so the "
          "kernel-varying predictor is loaded); 'none' runs the server without it, empty "
          "leaves the server's default");
ABSL_FLAG(std::string, address, "", "host:port of a running server");
ABSL_FLAG(int, server_pid, 0, "PID of the running server at --address, for its memory");
ABSL_FLAG(std::string, trace, HABITAT_DEFAULT_TRACE,
          "Trace uploaded once and predicted by id (binary or Kineto JSON, gzip or not)");
ABSL_FLAG(int, batch_size, 64, "Batch size of a Kineto JSON --trace");
ABSL_FLAG(std::string, precision, "fp32", "Precision of a Kineto JSON --trace");
ABSL_FLAG(std::string, catalog, "aws", "Price catalog of every Predict (empty: no prices)");
ABSL_FLAG(int, channels, 2, "TCP connections");
ABSL_FLAG(int, concurrency, 32, "Calls in flight (closed loop)");
ABSL_FLAG(double, warmup_s, 5, "Seconds of load before measuring");
ABSL_FLAG(double, duration_s, 60, "Seconds measured");
ABSL_FLAG(double, deadline_s, 10, "Deadline of each call");
ABSL_FLAG(double, min_rps, 0, "Fail when fewer measured calls per second complete");
ABSL_FLAG(double, max_rss_mib, 0, "Fail when the server's peak RSS exceeds this (0: no check)");

namespace habitat {
namespace load_test {
namespace {

double Mib(int64_t kib) { return static_cast<double>(kib) / 1024.0; }

int Run(std::string* store_dir) {
  std::unique_ptr<ServerProcess> server;
  std::string address = absl::GetFlag(FLAGS_address);
  pid_t pid = absl::GetFlag(FLAGS_server_pid);
  if (!absl::GetFlag(FLAGS_server_binary).empty()) {
    std::vector<std::string> args =
        absl::StrSplit(absl::GetFlag(FLAGS_server_args), ' ', absl::SkipEmpty());
    const std::string store = absl::GetFlag(FLAGS_server_store);
    if (store == "sqlite") {
      char pattern[] = "/tmp/habitat_load_test.XXXXXX";
      if (mkdtemp(pattern) == nullptr) {
        std::fprintf(stderr, "load_test: cannot create a temporary directory\n");
        return 1;
      }
      *store_dir = pattern;
      args.push_back(absl::StrCat("--store=sqlite:", *store_dir, "/traces.db"));
    } else if (store == "memory") {
      args.push_back("--store=memory");
    } else if (!store.empty()) {
      std::fprintf(stderr, "load_test: --server_store must be sqlite, memory or empty\n");
      return 2;
    }
    const std::string models_dir = absl::GetFlag(FLAGS_server_models_dir);
    if (!models_dir.empty()) args.push_back("--models_dir=" + models_dir);
    auto started =
        ServerProcess::Start(absl::GetFlag(FLAGS_server_binary), args, absl::Seconds(30));
    if (!started.ok()) {
      std::fprintf(stderr, "load_test: %s\n", std::string(started.status().message()).c_str());
      return 1;
    }
    server = std::move(*started);
    address = absl::StrCat("127.0.0.1:", server->port());
    pid = server->pid();
  }
  if (address.empty()) {
    std::fprintf(stderr, "load_test: give --server_binary or --address\n");
    return 2;
  }

  // Upload once, and check one answer before loading the server.
  TraceLoadOptions load;
  load.batch_size = static_cast<uint32_t>(absl::GetFlag(FLAGS_batch_size));
  auto precision = ParsePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok()) {
    std::fprintf(stderr, "load_test: %s\n", std::string(precision.status().message()).c_str());
    return 2;
  }
  load.precision = *precision;
  auto trace = LoadTraceFile(absl::GetFlag(FLAGS_trace), load);
  if (!trace.ok()) {
    std::fprintf(stderr, "load_test: %s\n", std::string(trace.status().message()).c_str());
    return 1;
  }
  ClientOptions client_options;
  client_options.wait_for_ready = true;
  auto client = PredictionClient::Connect(address, client_options);
  if (!client.ok()) {
    std::fprintf(stderr, "load_test: %s\n", std::string(client.status().message()).c_str());
    return 1;
  }
  v1::UploadTraceRequest upload;
  *upload.mutable_trace() = *trace;
  auto uploaded = (*client)->UploadTrace(upload);
  if (!uploaded.ok()) {
    std::fprintf(stderr, "load_test: UploadTrace: %s\n",
                 std::string(uploaded.status().message()).c_str());
    return 1;
  }
  v1::PredictRequest request;
  request.set_trace_id(uploaded->trace_id());
  request.set_catalog(absl::GetFlag(FLAGS_catalog));
  auto first = (*client)->Predict(request);
  if (!first.ok() || first->predictions_size() == 0) {
    std::fprintf(stderr, "load_test: first Predict: %s\n",
                 first.ok() ? "no predictions" : std::string(first.status().message()).c_str());
    return 1;
  }
  // Which methods the answer used: MLP operations show that the server runs
  // with the kernel-varying predictor.
  int64_t by_method[v1::PredictionMethod_ARRAYSIZE] = {};
  for (const auto& prediction : first->predictions()) {
    for (const auto& total : prediction.method_totals()) {
      if (v1::PredictionMethod_IsValid(total.method())) {
        by_method[total.method()] += total.operations();
      }
    }
  }
  std::vector<std::string> methods;
  for (int m = 1; m < v1::PredictionMethod_ARRAYSIZE; ++m) {
    if (by_method[m] > 0) {
      methods.push_back(absl::StrCat(
          v1::PredictionMethod_Name(static_cast<v1::PredictionMethod>(m)), "=", by_method[m]));
    }
  }
  std::fprintf(stderr,
               "load_test: trace %s (%d operations), %d GPUs per answer; operations by method "
               "over all GPUs: %s\n",
               uploaded->trace_id().c_str(), trace->operations_size(), first->predictions_size(),
               absl::StrJoin(methods, ", ").c_str());
  const std::string models_dir = absl::GetFlag(FLAGS_server_models_dir);
  if (server != nullptr && !models_dir.empty() && models_dir != "none" &&
      by_method[v1::PREDICTION_METHOD_KERNEL_VARYING] == 0) {
    std::fprintf(stderr,
                 "load_test: the server has --models_dir=%s but predicted no "
                 "operation with the kernel-varying predictor\n",
                 models_dir.c_str());
    return 1;
  }

  LoadOptions options;
  options.address = address;
  options.channels = absl::GetFlag(FLAGS_channels);
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.deadline = absl::Seconds(absl::GetFlag(FLAGS_deadline_s));
  options.warmup = absl::Seconds(absl::GetFlag(FLAGS_warmup_s));
  options.duration = absl::Seconds(absl::GetFlag(FLAGS_duration_s));
  options.expected_predictions = first->predictions_size();

  MemorySample after_warmup, highest;
  bool have_memory = false;
  // CPU used by the server and by this client over the measured window.
  double server_cpu_start = -1, server_cpu_end = -1, client_cpu_start = 0;
  auto server_cpu = [&]() -> double {
    if (pid <= 0) return -1;
    auto cpu = ReadCpuSeconds(pid);
    return cpu.ok() ? *cpu : -1;
  };
  auto sample = [&](MemorySample* into) {
    if (pid <= 0) return;
    auto memory = ReadMemory(pid);
    if (!memory.ok()) return;
    if (into != nullptr) *into = *memory;
    highest.rss_kib = std::max(highest.rss_kib, memory->rss_kib);
    highest.peak_rss_kib = std::max(highest.peak_rss_kib, memory->peak_rss_kib);
    have_memory = true;
  };
  const LoadResult result = RunLoad(
      options, request,
      [&] {
        sample(&after_warmup);
        server_cpu_start = server_cpu();
        client_cpu_start = OwnCpuSeconds();
      },
      [&] { sample(nullptr); });
  // The last calls finish just after the window; their CPU is counted too.
  server_cpu_end = server_cpu();
  const double client_cpu = OwnCpuSeconds() - client_cpu_start;
  MemorySample at_end;
  sample(&at_end);

  std::vector<std::string> errors;
  for (const auto& [code, n] : result.errors) errors.push_back(absl::StrCat(code, "=", n));
  std::printf("address            %s\n", address.c_str());
  std::printf("load               %d calls in flight over %d connections\n", options.concurrency,
              options.channels);
  std::printf("answers            %d GPUs each, catalog '%s'\n", options.expected_predictions,
              request.catalog().c_str());
  std::printf("calls              %lld (warm-up included)\n", static_cast<long long>(result.calls));
  std::printf("measured           %lld calls in %.1f s = %.0f calls/s\n",
              static_cast<long long>(result.measured), result.seconds, result.calls_per_second());
  std::printf("latency (ms)       p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n",
              result.Percentile(0.50) / 1e6, result.Percentile(0.90) / 1e6,
              result.Percentile(0.99) / 1e6,
              result.latencies_ns.empty() ? 0.0 : result.latencies_ns.back() / 1e6);
  std::printf("errors             %lld%s%s\n", static_cast<long long>(result.error_count()),
              errors.empty() ? "" : ": ", absl::StrJoin(errors, ", ").c_str());
  if (result.measured > 0) {
    std::printf("CPU per call (us)  client %.1f", client_cpu / result.measured * 1e6);
    if (server_cpu_start >= 0 && server_cpu_end >= 0) {
      std::printf(", server %.1f (%.2f cores busy)",
                  (server_cpu_end - server_cpu_start) / result.measured * 1e6,
                  (server_cpu_end - server_cpu_start) / result.seconds);
    }
    std::printf("\n");
  }
  if (have_memory) {
    std::printf(
        "server RSS (MiB)   after warm-up %.1f, end %.1f, highest sampled %.1f, "
        "VmHWM %.1f\n",
        Mib(after_warmup.rss_kib), Mib(at_end.rss_kib), Mib(highest.rss_kib),
        Mib(highest.peak_rss_kib));
  }

  int exit_code = 0;
  if (result.error_count() > 0 || result.measured == 0) {
    std::fprintf(stderr, "load_test: FAILED: %lld errors, %lld measured calls\n",
                 static_cast<long long>(result.error_count()),
                 static_cast<long long>(result.measured));
    exit_code = 1;
  }
  if (result.calls_per_second() < absl::GetFlag(FLAGS_min_rps)) {
    std::fprintf(stderr, "load_test: FAILED: %.0f calls/s < --min_rps=%.0f\n",
                 result.calls_per_second(), absl::GetFlag(FLAGS_min_rps));
    exit_code = 1;
  }
  const double max_rss = absl::GetFlag(FLAGS_max_rss_mib);
  if (max_rss > 0 && have_memory && Mib(highest.peak_rss_kib) > max_rss) {
    std::fprintf(stderr, "load_test: FAILED: server peak RSS %.1f MiB > --max_rss_mib=%.0f\n",
                 Mib(highest.peak_rss_kib), max_rss);
    exit_code = 1;
  }
  if (server != nullptr) {
    const absl::Status stopped = server->Stop(absl::Seconds(30));
    if (!stopped.ok()) {
      std::fprintf(stderr, "load_test: %s\n", std::string(stopped.message()).c_str());
      exit_code = 1;
    }
  }
  return exit_code;
}

}  // namespace
}  // namespace load_test
}  // namespace habitat

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Saturating Predict load on a habitat-server; see load_test.cc.");
  absl::ParseCommandLine(argc, argv);
  std::string store_dir;
  const int exit_code = habitat::load_test::Run(&store_dir);
  if (!store_dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(store_dir, ignored);
  }
  return exit_code;
}
