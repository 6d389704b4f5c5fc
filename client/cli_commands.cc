#include "client/cli_commands.h"

#include <functional>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/cli_args.h"
#include "client/cli_command_context.h"
#include "client/cli_output.h"
#include "client/cli_predict_command.h"
#include "client/cli_service.h"
#include "client/cli_text.h"
#include "client/trace_loader.h"
#include "common/file_io.h"
#include "common/spelling.h"
#include "common/status_macros.h"
#include "core/trace/trace_validation.h"

namespace habitat {
namespace {

constexpr char kMainUsage[] =
    "usage: habitat COMMAND [ARGS]\n"
    "\n"
    "Predicts how long one training iteration of a profiled PyTorch model takes on\n"
    "other GPUs, and what it costs.\n"
    "\n"
    "commands:\n"
    "  predict TRACE        predict the trace's iteration time on other GPUs\n"
    "  devices              list the GPUs predictions can target\n"
    "  catalogs             list the price catalogs\n"
    "  upload TRACE         store a trace on a server and print its id\n"
    "  import-kineto IN OUT convert a torch.profiler JSON trace to a habitat trace\n"
    "  health               ask a habitat-server whether it serves (exit 0 if so)\n"
    "\n"
    "Without --server, commands run the predictor in-process on the data files in\n"
    "--data-dir. 'habitat COMMAND --help' describes a command.\n"
    "\n"
    "server options (predict, devices, catalogs, upload, health):\n"
    "  --server HOST:PORT     the habitat-server to ask\n"
    "  --token-file FILE      bearer token for servers that require one (default:\n"
    "                         $HABITAT_TOKEN)\n"
    "  --tls                  use TLS, verifying the server against the system's CAs\n"
    "  --tls-ca FILE          ... or against these PEM CA certificates (implies --tls)\n"
    "  --tls-cert/--tls-key   PEM client certificate and key (mutual TLS)\n"
    "  --tls-server-name NAME name the server's certificate must carry\n";

constexpr char kHealthUsage[] =
    "usage: habitat health --server HOST:PORT [--service NAME] [--timeout-s S]\n"
    "                      [--token-file FILE] [--tls] [--tls-ca FILE] ...\n"
    "\n"
    "Asks the server's gRPC health service (grpc.health.v1) whether it serves and\n"
    "prints the answer. Exit 0 when SERVING; 1 when NOT_SERVING (draining, or its\n"
    "listener was lost), unknown or unreachable within --timeout-s (default 5).\n"
    "Usable as a Docker HEALTHCHECK or a Kubernetes exec probe.\n"
    "  --service NAME  one service, e.g. habitat.v1.PredictionService (default:\n"
    "                  the whole server)\n";

constexpr char kDevicesUsage[] =
    "usage: habitat devices [--server HOST:PORT | --data-dir DIR] [--format table|json|csv]\n"
    "                       [--include-test-only]\n";

constexpr char kCatalogsUsage[] =
    "usage: habitat catalogs [--server HOST:PORT | --data-dir DIR] [--format table|json|csv]\n";

constexpr char kUploadUsage[] =
    "usage: habitat upload TRACE --server HOST:PORT [--model NAME]\n"
    "                      [--traced-batch-size N] [--precision P] [--step N]\n"
    "\n"
    "Stores the trace on the server and prints its id (sha256:...), which\n"
    "'habitat predict ID --server HOST:PORT' accepts in place of the file.\n"
    "--traced-batch-size is the batch the trace ran at, as in predict (--batch-size,\n"
    "its name here before, still works).\n";

constexpr char kImportUsage[] =
    "usage: habitat import-kineto IN OUT [--model NAME] [--traced-batch-size N]\n"
    "                             [--precision P] [--wall-ns N] [--step N]\n"
    "\n"
    "Converts a torch.profiler JSON trace (prof.export_chrome_trace, optionally\n"
    "gzipped) to a binary habitat trace; OUT ending in .gz is gzipped.\n"
    "  --traced-batch-size N  the batch the trace ran at, as in predict (--batch-size,\n"
    "                         its name here before, still works)\n"
    "  --wall-ns N            iteration wall time measured without the profiler, in ns\n"
    "                         (default: the profiled step's less the profiler's\n"
    "                         estimated cost)\n";

int Devices(const std::vector<std::string>& words, const CommandContext& ctx) {
  absl::StatusOr<CliArgs> args;
  if (auto done = ParseWithoutPositionals(
          words, ConcatOptions({kServiceOptions, {{"include-test-only", false}}}), kDevicesUsage,
          ctx, &args)) {
    return *done;
  }
  absl::StatusOr<OutputFormat> format = ParseOutputFormat(args->Get("format", "table"));
  if (!format.ok()) return ctx.Usage(format.status());
  bool usage_error = false;
  absl::StatusOr<std::unique_ptr<CliService>> service = OpenService(*args, ctx, &usage_error);
  if (!service.ok()) return usage_error ? ctx.Usage(service.status()) : ctx.Fail(service.status());
  v1::ListDevicesRequest request;
  request.set_include_test_only(args->Has("include-test-only"));
  absl::StatusOr<v1::ListDevicesResponse> response = (*service)->ListDevices(request);
  if (!response.ok()) return ctx.Fail(response.status());
  if (*format == OutputFormat::kJson) {
    absl::StatusOr<std::string> json = FormatJson(*response);
    if (!json.ok()) return ctx.Fail(json.status());
    *ctx.out << *json;
  } else {
    *ctx.out << (*format == OutputFormat::kCsv ? FormatDevicesCsv(*response)
                                               : FormatDevicesTable(*response));
  }
  return kExitOk;
}

int Catalogs(const std::vector<std::string>& words, const CommandContext& ctx) {
  absl::StatusOr<CliArgs> args;
  if (auto done = ParseWithoutPositionals(words, kServiceOptions, kCatalogsUsage, ctx, &args)) {
    return *done;
  }
  absl::StatusOr<OutputFormat> format = ParseOutputFormat(args->Get("format", "table"));
  if (!format.ok()) return ctx.Usage(format.status());
  bool usage_error = false;
  absl::StatusOr<std::unique_ptr<CliService>> service = OpenService(*args, ctx, &usage_error);
  if (!service.ok()) return usage_error ? ctx.Usage(service.status()) : ctx.Fail(service.status());
  absl::StatusOr<v1::ListCatalogsResponse> response = (*service)->ListCatalogs();
  if (!response.ok()) return ctx.Fail(response.status());
  if (*format == OutputFormat::kJson) {
    absl::StatusOr<std::string> json = FormatJson(*response);
    if (!json.ok()) return ctx.Fail(json.status());
    *ctx.out << *json;
  } else {
    *ctx.out << (*format == OutputFormat::kCsv ? FormatCatalogsCsv(*response)
                                               : FormatCatalogsTable(*response));
  }
  return kExitOk;
}

int Upload(const std::vector<std::string>& words, const CommandContext& ctx) {
  absl::StatusOr<CliArgs> args = CliArgs::Parse(
      words,
      ConcatOptions({kRemoteOptions, {{"help", false}, {kTracedBatchFlag, true}}, kTraceOptions}));
  if (!args.ok()) return ctx.Usage(args.status());
  if (args->Has("help")) {
    *ctx.out << kUploadUsage;
    return kExitOk;
  }
  if (args->positional().size() != 1) {
    return ctx.Usage(absl::InvalidArgumentError("expected exactly one TRACE file"));
  }
  if (args->Get("server").empty()) {
    return ctx.Usage(absl::InvalidArgumentError(
        "--server HOST:PORT is required: an upload stores the trace on a server"));
  }
  absl::StatusOr<TraceLoadOptions> trace_options = UploadTraceOptions(*args, ctx);
  if (!trace_options.ok()) return ctx.Usage(trace_options.status());
  if (absl::StatusOr<CliServiceOptions> remote = ServiceOptions(*args, ctx); !remote.ok()) {
    return ctx.Usage(remote.status());
  }
  absl::StatusOr<v1::Trace> trace = LoadTrace(args->positional()[0], *trace_options, ctx);
  if (!trace.ok()) return ctx.Fail(trace.status());
  bool usage_error = false;
  absl::StatusOr<std::unique_ptr<CliService>> service = OpenService(*args, ctx, &usage_error);
  if (!service.ok()) return usage_error ? ctx.Usage(service.status()) : ctx.Fail(service.status());
  v1::UploadTraceRequest request;
  *request.mutable_trace() = std::move(*trace);
  absl::StatusOr<v1::UploadTraceResponse> response = (*service)->UploadTrace(request);
  if (!response.ok()) return ctx.Fail(response.status());
  *ctx.out << response->trace_id() << "\n";
  *ctx.err << (response->created() ? "stored as a new trace\n"
                                   : "the server already had this trace\n");
  return kExitOk;
}

int ImportKineto(const std::vector<std::string>& words, const CommandContext& ctx) {
  absl::StatusOr<CliArgs> args = CliArgs::Parse(
      words, ConcatOptions({{{"help", false}, {kTracedBatchFlag, true}}, kTraceOptions}));
  if (!args.ok()) return ctx.Usage(args.status());
  if (args->Has("help")) {
    *ctx.out << kImportUsage;
    return kExitOk;
  }
  if (args->positional().size() != 2) {
    return ctx.Usage(absl::InvalidArgumentError("expected IN and OUT"));
  }
  absl::StatusOr<TraceLoadOptions> trace_options = UploadTraceOptions(*args, ctx);
  if (!trace_options.ok()) return ctx.Usage(trace_options.status());
  const std::string& in = args->positional()[0];
  const std::string& out = args->positional()[1];
  TraceLoadReport report;
  absl::StatusOr<v1::Trace> trace = LoadTraceFile(in, *trace_options, &report);
  if (!trace.ok()) return ctx.Fail(trace.status());
  if (report.kind != TraceFileKind::kKinetoJson) {
    return ctx.Fail(absl::InvalidArgumentError(
        absl::StrCat(in, ": is already a habitat trace, not a torch.profiler JSON trace")));
  }
  // Never write a trace that `predict` would refuse. A missing batch size
  // is the one thing `predict --batch-size` can still supply.
  v1::Trace check = *trace;
  if (check.batch_size() == 0) check.set_batch_size(1);
  if (absl::Status valid = ValidateTrace(check); !valid.ok()) {
    return ctx.Fail(
        absl::Status(valid.code(), absl::StrCat(in, ": the imported trace would be refused, so '",
                                                out, "' was not written: ", valid.message())));
  }
  absl::Status saved = SaveTraceFile(out, *trace);
  if (!saved.ok()) {
    return ctx.Fail(
        absl::Status(saved.code(), absl::StrCat("cannot write '", out, "': ", saved.message())));
  }
  int64_t kernels = trace->unattributed_kernels_size();
  for (const auto& op : trace->operations()) {
    kernels += op.forward().kernels_size() + op.backward().kernels_size();
  }
  PrintNotes(report, ctx);
  *ctx.err << "wrote " << out << ": model " << Printable(trace->model_name()) << ", "
           << trace->operations_size() << " operations, " << kernels << " kernels, GPU busy "
           << static_cast<double>(trace->iteration_gpu_busy_ns()) / 1e6 << " ms\n";
  if (trace->batch_size() == 0) {
    *ctx.err << "note: no --traced-batch-size given; 'habitat predict' will need one\n";
  }
  return kExitOk;
}

int Health(const std::vector<std::string>& words, const CommandContext& ctx) {
  absl::StatusOr<CliArgs> args;
  if (auto done = ParseWithoutPositionals(
          words,
          ConcatOptions(
              {kRemoteOptions, {{"help", false}, {"service", true}, {"timeout-s", true}}}),
          kHealthUsage, ctx, &args)) {
    return *done;
  }
  if (args->Get("server").empty()) {
    return ctx.Usage(absl::InvalidArgumentError("--server HOST:PORT is required"));
  }
  absl::StatusOr<std::optional<int64_t>> timeout = args->GetInt("timeout-s", 1, 3600);
  if (!timeout.ok()) return ctx.Usage(timeout.status());
  absl::StatusOr<CliServiceOptions> options = ServiceOptions(*args, ctx);
  if (!options.ok()) return ctx.Usage(options.status());
  if (absl::Status token = ReadToken(*args, &*options); !token.ok()) return ctx.Fail(token);
  // One attempt within the timeout: a probe has its own schedule.
  options->client.deadline = absl::Seconds(timeout->value_or(5));
  options->client.max_attempts = 1;
  absl::StatusOr<std::unique_ptr<PredictionClient>> client =
      PredictionClient::Connect(options->server, options->client);
  if (!client.ok()) return ctx.Fail(client.status());
  absl::StatusOr<int> status = (*client)->Health(args->Get("service"));
  if (!status.ok()) return ctx.Fail(status.status());
  static constexpr const char* kNames[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
  const char* name = *status >= 0 && *status < 4 ? kNames[*status] : "UNKNOWN";
  *ctx.out << name << "\n";
  return *status == 1 ? kExitOk : kExitFailure;
}

}  // namespace

int RunHabitatCli(const std::vector<std::string>& args, const CliEnvironment& env,
                  std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << "habitat: missing COMMAND\n\n" << kMainUsage;
    return kExitUsage;
  }
  const std::string& command = args[0];
  if (command == "help" || command == "--help" || command == "-h") {
    out << kMainUsage;
    return kExitOk;
  }
  if (command == "version" || command == "--version") {
    out << "habitat " << env.version << "\n";
    return kExitOk;
  }
  using Handler = std::function<int(const std::vector<std::string>&, const CommandContext&)>;
  struct Command {
    const char* name;
    Handler run;
  };
  const Command commands[] = {
      {"predict", RunPredictCommand},  {"devices", Devices},
      {"catalogs", Catalogs},          {"upload", Upload},
      {"import-kineto", ImportKineto}, {"health", Health},
  };
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const auto& c : commands) {
    if (command == c.name) return c.run(rest, CommandContext{command, &env, &out, &err});
  }
  std::vector<std::string> names;
  for (const auto& c : commands) names.push_back(c.name);
  const std::string suggestion = DidYouMean(command, names);
  err << "habitat: unknown command '" << Printable(command) << "'";
  // A near miss needs the one word, not the whole usage.
  if (!suggestion.empty()) {
    err << Printable(suggestion) << "; 'habitat --help' lists the commands\n";
  } else {
    err << "\n\n" << kMainUsage;
  }
  return kExitUsage;
}

}  // namespace habitat
