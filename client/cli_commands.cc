#include "client/cli_commands.h"

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_args.h"
#include "client/cli_output.h"
#include "client/cli_plot.h"
#include "client/cli_service.h"
#include "client/cli_text.h"
#include "client/cli_warnings.h"
#include "client/trace_loader.h"
#include "common/file_io.h"
#include "common/spelling.h"
#include "common/status_macros.h"
#include "core/backend/prediction_backend.h"
#include "core/devices/text_proto_file.h"
#include "core/trace/trace_id.h"
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

constexpr char kPredictUsage[] =
    "usage: habitat predict TRACE [options]\n"
    "\n"
    "TRACE is a habitat trace (.pb, optionally .gz), a torch.profiler JSON trace\n"
    "(.json, optionally .gz), or with --server the id printed by 'habitat upload'.\n"
    "The table goes to stdout; its warnings to stderr, one line per kind naming the\n"
    "GPUs it concerns (--format json has them in full: structured_warnings).\n"
    "\n"
    "  --server HOST:PORT     ask a habitat-server instead of predicting in-process\n"
    "                         (token and TLS options: see 'habitat --help')\n"
    "  --data-dir DIR         GPU and price data for in-process predictions\n"
    "  --models-dir DIR       trained predictors for in-process predictions ('none':\n"
    "                         kernel-varying ops carried over unscaled)\n"
    "  --devices A,B          target GPU ids (default: every GPU; see 'habitat devices')\n"
    "  --catalog NAME         price catalog (default: the server's, aws unless it says\n"
    "                         otherwise; 'none': no prices)\n"
    "  --catalog-file FILE    a habitat.v1.PriceCatalog in text format\n"
    "  --spot                 spot prices instead of on-demand\n"
    "  --format FORMAT        table (default), json or csv\n"
    "  --explain              each warning in full under its line, with its numbers\n"
    "                         and the GPUs each applies to (table only)\n"
    "  -q, --quiet            no warnings and no notes on stderr (errors still)\n"
    "  --breakdown            per GPU, the operations with the largest predicted time\n"
    "  --top N                operations listed per GPU with --breakdown (default 10)\n"
    "  --model NAME           model name (JSON traces; default: the file name)\n"
    "  --batch-size N         predict at N samples per iteration (default: the trace's\n"
    "                         batch); another batch than the trace's is predicted by\n"
    "                         scaling its kernels, up to 256x either way, with a warning\n"
    "  --traced-batch-size N  the batch the trace ran at (JSON traces: inferred from the\n"
    "                         layers' input shapes when not given; a habitat trace\n"
    "                         records its own)\n"
    "  --precision P          fp32, tf32, fp16, bf16, amp_fp16 or amp_bf16 (JSON traces:\n"
    "                         inferred from autocast and the input types of matrix\n"
    "                         multiplies, convolutions, RNNs and attention if not given)\n"
    "  --step N               the ProfilerStep#N to import (JSON traces; default: last)\n"
    "  --wall-ns N            iteration wall time measured without the profiler, in ns\n"
    "                         (JSON traces; calibrates the host model)\n"
    "  --host-speed X         the target machines' CPUs run the training loop X times as\n"
    "                         fast as the origin's (0.01 to 100, default 1; changes wall\n"
    "                         time only)\n"
    "  --fit                  predict each GPU at the largest batch whose predicted peak\n"
    "                         memory fits it (powers of two; needs a trace with memory\n"
    "                         data, as the habitat agent records), ranked by cost\n"
    "  --fit-step N           with --fit: the batches are multiples of N instead\n"
    "  --plot FILE            also draw samples/s against price per GPU-hour, the Pareto\n"
    "                         front marked, to FILE.svg or FILE.png (with the Python\n"
    "                         client and matplotlib: pip install './client/python[plot]')\n"
    "  --gpus N               also predict a data-parallel step (PyTorch DDP over NCCL) on\n"
    "                         N GPUs of each kind in one node, each at the batch above\n"
    "  --nodes M              ... on M such nodes (the network from the catalog's instance)\n"
    "  --bucket-mb B          DDP's bucket_cap_mb (default 25)\n"
    "  --no-nvls              all-reduces without NVLink SHARP (as NCCL_NVLS_ENABLE=0);\n"
    "                         by default NVLS is used where the node has it and it is\n"
    "                         faster, as NCCL does\n"
    "  --instances            also predict one node of every multi-GPU instance size the\n"
    "                         catalog offers each GPU in (but the --gpus one), with the\n"
    "                         same --bucket-mb and --no-nvls\n";

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

// One subcommand's run: the streams and what to print on misuse.
struct Context {
  std::string command;
  const CliEnvironment* env;
  std::ostream* out;
  std::ostream* err;
  // -q: no warnings or notes on `err` (errors still).
  bool quiet = false;

  int Usage(const absl::Status& status) const {
    *err << "habitat " << command << ": " << status.message() << "\n"
         << "Run 'habitat " << command << " --help' for usage.\n";
    return kExitUsage;
  }
  int Fail(const absl::Status& status) const {
    *err << "habitat " << command << ": " << status.message() << "\n";
    return kExitFailure;
  }
};

std::vector<OptionSpec> Concat(std::initializer_list<std::vector<OptionSpec>> lists) {
  std::vector<OptionSpec> all;
  for (const auto& list : lists) all.insert(all.end(), list.begin(), list.end());
  return all;
}

// How to reach a server: address, token and TLS.
const std::vector<OptionSpec> kRemoteOptions = {
    {"server", true},   {"token-file", true}, {"tls", false},           {"tls-ca", true},
    {"tls-cert", true}, {"tls-key", true},    {"tls-server-name", true}};
const std::vector<OptionSpec> kServiceOptions =
    Concat({kRemoteOptions,
            {{"data-dir", true}, {"models-dir", true}, {"format", true}, {"help", false}}});
const std::vector<OptionSpec> kTraceOptions = {
    {"model", true}, {"batch-size", true}, {"precision", true}, {"step", true}, {"wall-ns", true}};
// The batch the trace ran at, where --batch-size is the batch to predict at.
constexpr char kTracedBatchFlag[] = "traced-batch-size";

// Reads the remote options. Token and TLS options need --server: they would
// be silently ignored in-process. INVALID_ARGUMENT is a usage error.
absl::StatusOr<CliServiceOptions> ServiceOptions(const CliArgs& args, const Context& ctx) {
  CliServiceOptions options;
  options.server = args.Get("server");
  options.data_dir = args.Get("data-dir", ctx.env->default_data_dir);
  options.models_dir = args.Get("models-dir", ctx.env->default_models_dir);
  if (options.models_dir == "none") options.models_dir.clear();
  const bool tls_flag = args.Has("tls") || args.Has("tls-ca") || args.Has("tls-cert") ||
                        args.Has("tls-key") || args.Has("tls-server-name");
  if (options.server.empty() && (tls_flag || args.Has("token-file"))) {
    return absl::InvalidArgumentError("--token-file and --tls* apply to a server: give --server");
  }
  if (options.server.empty()) return options;
  options.client.tls.enabled = tls_flag;
  options.client.tls.ca_file = args.Get("tls-ca");
  options.client.tls.cert_file = args.Get("tls-cert");
  options.client.tls.key_file = args.Get("tls-key");
  options.client.tls.server_name = args.Get("tls-server-name");
  return options;
}

// The token comes from --token-file or $HABITAT_TOKEN, never from the
// command line (it would show in `ps` and shell history).
absl::Status ReadToken(const CliArgs& args, CliServiceOptions* options) {
  if (options->server.empty()) return absl::OkStatus();
  if (args.Has("token-file")) {
    const std::string path = args.Get("token-file");
    absl::StatusOr<std::string> token = ReadFile(path);
    if (!token.ok()) {
      return absl::Status(token.status().code(),
                          absl::StrCat("cannot read --token-file: ", token.status().message()));
    }
    options->client.bearer_token = std::string(absl::StripAsciiWhitespace(*token));
    if (options->client.bearer_token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--token-file '", path, "' is empty"));
    }
  } else if (const char* env = std::getenv("HABITAT_TOKEN"); env != nullptr && *env != '\0') {
    options->client.bearer_token = std::string(absl::StripAsciiWhitespace(env));
  }
  return absl::OkStatus();
}

// Opens the service; `usage_error` is set when the failure is the command
// line's fault.
absl::StatusOr<std::unique_ptr<CliService>> Open(const CliArgs& args, const Context& ctx,
                                                 bool* usage_error) {
  *usage_error = false;
  absl::StatusOr<CliServiceOptions> options = ServiceOptions(args, ctx);
  if (!options.ok()) {
    *usage_error = true;
    return options.status();
  }
  HABITAT_RETURN_IF_ERROR(ReadToken(args, &*options));
  return OpenCliService(*options);
}

// Parses the trace-loading options shared by predict, upload and import.
// `batch_flag` names the trace's own batch: "traced-batch-size", or
// "batch-size" where upload and import-kineto are given its old name.
absl::StatusOr<TraceLoadOptions> TraceOptions(const CliArgs& args, const char* batch_flag) {
  TraceLoadOptions options;
  options.model_name = args.Get("model");
  absl::StatusOr<std::optional<int64_t>> batch = args.GetInt(batch_flag, 1, kMaxBatchSize);
  if (!batch.ok()) return batch.status();
  if (batch->has_value()) options.batch_size = static_cast<uint32_t>(**batch);
  options.batch_flag = absl::StrCat("--", batch_flag);
  if (args.Has("precision")) {
    absl::StatusOr<v1::Precision> precision = ParsePrecision(args.Get("precision"));
    if (!precision.ok()) return precision.status();
    options.precision = *precision;
  }
  absl::StatusOr<std::optional<int64_t>> step = args.GetInt("step", 0, INT64_MAX);
  if (!step.ok()) return step.status();
  options.profiler_step = *step;
  if (args.Has("wall-ns")) {
    absl::StatusOr<std::optional<int64_t>> wall = args.GetInt("wall-ns", 1, INT64_MAX);
    if (!wall.ok()) return wall.status();
    options.iteration_wall_ns = *wall;
  }
  return options;
}

// upload's and import-kineto's trace options. The trace's own batch is
// --traced-batch-size there as in predict, where --batch-size is the batch
// to predict at; --batch-size, its name there before, still works, with a
// note.
absl::StatusOr<TraceLoadOptions> UploadTraceOptions(const CliArgs& args, const Context& ctx) {
  if (!args.Has("batch-size")) return TraceOptions(args, kTracedBatchFlag);
  if (args.Has(kTracedBatchFlag)) {
    return absl::InvalidArgumentError(
        "give --traced-batch-size alone (--batch-size is its old name)");
  }
  if (!ctx.quiet) {
    *ctx.err << "note: --batch-size here is the batch the trace ran at, now spelled "
                "--traced-batch-size as in predict (where --batch-size is the batch to predict "
                "at)\n";
  }
  return TraceOptions(args, "batch-size");
}

// What the loader inferred, on stderr: the user should see a guessed label.
void PrintNotes(const TraceLoadReport& report, const Context& ctx) {
  if (ctx.quiet) return;
  for (const std::string& note : report.notes) *ctx.err << Wrap("note: ", note, kTableWidth, 2);
}

// Loads a trace file and applies explicitly given overrides to binary traces
// too (a JSON import already took them).
absl::StatusOr<v1::Trace> LoadTrace(const std::string& path, const TraceLoadOptions& options,
                                    const Context& ctx) {
  TraceLoadReport report;
  absl::StatusOr<v1::Trace> trace = LoadTraceFile(path, options, &report);
  if (!trace.ok()) return trace.status();
  PrintNotes(report, ctx);
  if (report.kind == TraceFileKind::kBinaryTrace) {
    if (!options.model_name.empty()) trace->set_model_name(options.model_name);
    // Relabelling the recorded batch would only scale throughput and cost,
    // not predict them.
    if (options.batch_size > 0 && trace->batch_size() > 0 &&
        options.batch_size != trace->batch_size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: the trace records batch size %d; %s %d would relabel the samples without "
          "predicting them: drop it (habitat predict --batch-size %d predicts that batch)",
          path, trace->batch_size(), options.batch_flag, options.batch_size, options.batch_size));
    }
    if (options.batch_size > 0) trace->set_batch_size(options.batch_size);
    if (trace->batch_size() == 0) trace->set_batch_size(options.fallback_batch_size);
    if (options.precision != v1::PRECISION_UNSPECIFIED) trace->set_precision(options.precision);
  }
  if (trace->batch_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": the trace does not say how many samples an iteration processes (and its "
                     "operators' input shapes do not show it); pass ",
                     options.batch_flag, " N"));
  }
  return trace;
}

bool IsFile(const std::string& path) {
  std::error_code error;
  return std::filesystem::exists(path, error);
}

// The predict options that only make sense together, and --plot's file
// name; INVALID_ARGUMENT (a usage error) otherwise.
absl::Status CheckPredictOptions(const CliArgs& args, OutputFormat format,
                                 std::optional<int64_t> top) {
  if (args.Has("catalog") && args.Has("catalog-file")) {
    return absl::InvalidArgumentError("give --catalog or --catalog-file, not both");
  }
  if (args.Has("plot")) {
    HABITAT_RETURN_IF_ERROR(CheckPlotPath(args.Get("plot")));
    // Checked before predicting: the plot's x axis is the price.
    if (absl::EqualsIgnoreCase(args.Get("catalog"), "none")) {
      return absl::InvalidArgumentError(
          "--plot draws throughput against price per GPU-hour; --catalog none has no prices");
    }
  }
  if (args.Has("explain") && args.Has("quiet")) {
    return absl::InvalidArgumentError("give --explain or -q (--quiet), not both");
  }
  if (args.Has("explain") && format != OutputFormat::kTable) {
    return absl::InvalidArgumentError(
        "--explain expands the table's warnings; --format json has them in full "
        "(structured_warnings), --format csv in its warnings column");
  }
  if (top.has_value() && !args.Has("breakdown")) {
    return absl::InvalidArgumentError("--top N limits --breakdown; give both");
  }
  if (format == OutputFormat::kCsv && args.Has("breakdown")) {
    return absl::InvalidArgumentError(
        "--format csv has one row per GPU and no per-operation breakdown; use --format json "
        "or table with --breakdown");
  }
  if (format == OutputFormat::kCsv && (args.Has("gpus") || args.Has("instances"))) {
    return absl::InvalidArgumentError(
        "--format csv has one row per GPU and no data-parallel steps; use --format json or "
        "table with --gpus or --instances");
  }
  return absl::OkStatus();
}

// --gpus N [--nodes M] [--bucket-mb B] [--no-nvls] and --instances into the request.
absl::Status AddParallelOptions(const CliArgs& args, v1::PredictRequest* request) {
  HABITAT_ASSIGN_OR_RETURN(std::optional<int64_t> gpus, args.GetInt("gpus", 1, kMaxGpusPerNode));
  HABITAT_ASSIGN_OR_RETURN(std::optional<int64_t> nodes, args.GetInt("nodes", 1, kMaxNodes));
  HABITAT_ASSIGN_OR_RETURN(std::optional<int64_t> bucket_mb,
                           args.GetInt("bucket-mb", 1, kMaxBucketCapBytes >> 20));
  if (!gpus.has_value() && (nodes.has_value() || bucket_mb.has_value() || args.Has("no-nvls"))) {
    return absl::InvalidArgumentError(
        "--nodes, --bucket-mb and --no-nvls describe a data-parallel configuration: give "
        "--gpus N too");
  }
  if (gpus.has_value()) {
    v1::ParallelConfig* config = request->add_parallel();
    config->set_gpus_per_node(static_cast<uint32_t>(*gpus));
    if (nodes.has_value()) config->set_nodes(static_cast<uint32_t>(*nodes));
    if (bucket_mb.has_value()) config->set_bucket_cap_bytes(*bucket_mb << 20);
    config->set_disable_nvls(args.Has("no-nvls"));
  }
  request->set_catalog_instances(args.Has("instances"));
  return absl::OkStatus();
}

// The request fields the flags set directly; INVALID_ARGUMENT (a usage
// error) for a --host-speed that is not a number or flags that contradict.
// Ranges are the backend's to check, for every client alike.
absl::Status AddRequestOptions(const CliArgs& args, const std::vector<std::string>& devices,
                               std::optional<int64_t> batch, v1::PredictRequest* request) {
  if (batch.has_value()) request->set_batch_size(static_cast<uint32_t>(*batch));
  HABITAT_ASSIGN_OR_RETURN(std::optional<int64_t> fit_step,
                           args.GetInt("fit-step", 1, kMaxBatchSize));
  if (fit_step.has_value() && !args.Has("fit")) {
    return absl::InvalidArgumentError(
        "--fit-step N sets the batches --fit chooses from; give both");
  }
  if (args.Has("fit")) {
    if (batch.has_value()) {
      return absl::InvalidArgumentError(
          "--fit chooses each GPU's batch size; drop --batch-size (or drop --fit to predict one "
          "batch)");
    }
    request->mutable_fit()->set_batch_step(static_cast<uint32_t>(fit_step.value_or(0)));
  }
  HABITAT_RETURN_IF_ERROR(AddParallelOptions(args, request));
  for (const auto& device : devices) request->add_devices(device);
  // Without --spot the backend's default (on-demand) applies.
  if (args.Has("spot")) request->set_price_kind(v1::PRICE_KIND_SPOT);
  request->set_include_breakdown(args.Has("breakdown"));
  if (args.Has("host-speed")) {
    double speed = 0;
    if (!absl::SimpleAtod(args.Get("host-speed"), &speed)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--host-speed must be a number (the target host's speed relative to the origin's), "
          "got '",
          args.Get("host-speed"), "'"));
    }
    request->set_target_host_speed(speed);
  }
  return absl::OkStatus();
}

// --catalog-file into the request, and the header's label for it.
absl::Status AddCatalogFile(const CliArgs& args, v1::PredictRequest* request,
                            PredictionHeader* header) {
  if (!args.Has("catalog-file")) return absl::OkStatus();
  const std::string file = args.Get("catalog-file");
  HABITAT_RETURN_IF_ERROR(ReadTextProtoFile(file, request->mutable_inline_catalog()));
  header->inline_catalog_label =
      request->inline_catalog().name().empty()
          ? absl::StrCat("file ", file)
          : absl::StrCat("catalog ", request->inline_catalog().name(), " from ", file);
  return absl::OkStatus();
}

// --catalog NAME (or 'none') into the request; without it the server's
// default catalog prices the table, and the response names it.
void ChooseCatalog(const CliArgs& args, v1::PredictRequest* request) {
  if (args.Has("catalog")) request->set_catalog(args.Get("catalog"));
}

// predict's options: the service's and the trace's, then its own.
const std::vector<OptionSpec> kPredictOptions = Concat({kServiceOptions,
                                                        kTraceOptions,
                                                        {{"devices", true},
                                                         {"catalog", true},
                                                         {"catalog-file", true},
                                                         {"spot", false},
                                                         {"breakdown", false},
                                                         {"top", true},
                                                         {"host-speed", true},
                                                         {"fit", false},
                                                         {"fit-step", true},
                                                         {"plot", true},
                                                         {"gpus", true},
                                                         {"nodes", true},
                                                         {"bucket-mb", true},
                                                         {"no-nvls", false},
                                                         {"instances", false},
                                                         {"explain", false},
                                                         {"quiet", false, 'q'},
                                                         {kTracedBatchFlag, true}}});

// How the table mode prints its warnings on stderr: one line per kind
// (`explain`: with each warning's full text), or none with -q.
constexpr char kWarningsHint[] = "--explain for the details, -q to hide them";

int PrintPrediction(v1::PredictResponse response, const PredictionHeader& header,
                    OutputFormat format, const CliArgs& args, std::optional<int64_t> top,
                    const Context& ctx) {
  switch (format) {
    case OutputFormat::kTable: {
      TableOptions table;
      table.breakdown = args.Has("breakdown");
      if (top.has_value()) table.top_operations = static_cast<int>(*top);
      *ctx.out << FormatPredictionTable(response, header, table);
      ctx.out->flush();
      const bool explain = args.Has("explain");
      if (!ctx.quiet) {
        *ctx.err << FormatPredictionWarnings(response, explain, explain ? "" : kWarningsHint);
      }
      break;
    }
    case OutputFormat::kJson: {
      if (top.has_value()) KeepTopOperations(static_cast<int>(*top), &response);
      absl::StatusOr<std::string> json = FormatJson(response);
      if (!json.ok()) return ctx.Fail(json.status());
      *ctx.out << *json;
      break;
    }
    case OutputFormat::kCsv:
      *ctx.out << FormatPredictionCsv(response);
      break;
  }
  return kExitOk;
}

int Predict(const std::vector<std::string>& words, const Context& parent) {
  Context ctx = parent;
  absl::StatusOr<CliArgs> args = CliArgs::Parse(words, kPredictOptions);
  if (!args.ok()) return ctx.Usage(args.status());
  ctx.quiet = args->Has("quiet");
  if (args->Has("help")) {
    *ctx.out << kPredictUsage;
    return kExitOk;
  }
  if (args->positional().size() != 1) {
    return ctx.Usage(absl::InvalidArgumentError(
        args->positional().empty() ? "missing TRACE (a trace file or, with --server, a trace id)"
                                   : "expected exactly one TRACE"));
  }
  absl::StatusOr<OutputFormat> format = ParseOutputFormat(args->Get("format", "table"));
  if (!format.ok()) return ctx.Usage(format.status());
  absl::StatusOr<std::vector<std::string>> devices = args->GetList("devices");
  if (!devices.ok()) return ctx.Usage(devices.status());
  absl::StatusOr<std::optional<int64_t>> top = args->GetInt("top", 1, 100000);
  if (!top.ok()) return ctx.Usage(top.status());
  if (absl::Status checked = CheckPredictOptions(*args, *format, *top); !checked.ok()) {
    return ctx.Usage(checked);
  }
  absl::StatusOr<TraceLoadOptions> trace_options = TraceOptions(*args, kTracedBatchFlag);
  if (!trace_options.ok()) return ctx.Usage(trace_options.status());
  absl::StatusOr<std::optional<int64_t>> batch = args->GetInt("batch-size", 1, kMaxBatchSize);
  if (!batch.ok()) return ctx.Usage(batch.status());
  v1::PredictRequest request;
  if (absl::Status added = AddRequestOptions(*args, *devices, *batch, &request); !added.ok()) {
    return ctx.Usage(added);
  }
  // Misused server options are usage errors; find them before the work.
  if (absl::StatusOr<CliServiceOptions> remote = ServiceOptions(*args, ctx); !remote.ok()) {
    return ctx.Usage(remote.status());
  }

  const std::string& trace_arg = args->positional()[0];
  const bool by_id = IsWellFormedTraceId(trace_arg) && !IsFile(trace_arg);
  if (by_id && !args->Has("server")) {
    return ctx.Usage(absl::InvalidArgumentError(
        absl::StrCat("'", trace_arg,
                     "' is a trace id; ids refer to traces uploaded to a "
                     "server, so give --server HOST:PORT (or pass the trace file)")));
  }
  PredictionHeader header;
  if (by_id) {
    request.set_trace_id(trace_arg);
  } else {
    // A trace that shows no batch of its own ran at the one asked for.
    TraceLoadOptions options = *trace_options;
    if (options.batch_size == 0 && batch->has_value()) options.fallback_batch_size = **batch;
    absl::StatusOr<v1::Trace> trace = LoadTrace(trace_arg, options, ctx);
    if (!trace.ok()) return ctx.Fail(trace.status());
    header.model_name = trace->model_name();
    header.precision =
        trace->precision() == v1::PRECISION_UNSPECIFIED ? "" : PrecisionName(trace->precision());
    *request.mutable_trace() = std::move(*trace);
  }
  if (absl::Status read = AddCatalogFile(*args, &request, &header); !read.ok()) {
    return ctx.Fail(read);
  }
  ChooseCatalog(*args, &request);

  bool usage_error = false;
  absl::StatusOr<std::unique_ptr<CliService>> service = Open(*args, ctx, &usage_error);
  if (!service.ok()) return usage_error ? ctx.Usage(service.status()) : ctx.Fail(service.status());
  absl::StatusOr<v1::PredictResponse> response = (*service)->Predict(request);
  if (!response.ok()) return ctx.Fail(response.status());
  // A plot that fails costs the plot, not the prediction: the table first,
  // then why there is no plot (even with -q: the user asked for it).
  absl::Status drawn = absl::OkStatus();
  if (args->Has("plot")) drawn = PlotPrediction(*response, header.model_name, args->Get("plot"));
  const int code = PrintPrediction(*std::move(response), header, *format, *args, *top, ctx);
  if (!drawn.ok()) {
    *ctx.err << "warning: no plot: " << drawn.message() << "\n";
  } else if (args->Has("plot") && !ctx.quiet) {
    *ctx.err << "plot written to " << args->Get("plot") << "\n";
  }
  return code;
}

// Parses the options of a command that takes no positional arguments into
// `args`. Returns the exit code when the command ends here: --help printed
// `usage`, or the command line was wrong.
std::optional<int> ParseWithoutPositionals(const std::vector<std::string>& words,
                                           const std::vector<OptionSpec>& options,
                                           const char* usage, const Context& ctx,
                                           absl::StatusOr<CliArgs>* args) {
  *args = CliArgs::Parse(words, options);
  if (!args->ok()) return ctx.Usage(args->status());
  if ((*args)->Has("help")) {
    *ctx.out << usage;
    return kExitOk;
  }
  if (!(*args)->positional().empty()) {
    return ctx.Usage(absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", (*args)->positional()[0], "'")));
  }
  return std::nullopt;
}

int Devices(const std::vector<std::string>& words, const Context& ctx) {
  absl::StatusOr<CliArgs> args;
  if (auto done =
          ParseWithoutPositionals(words, Concat({kServiceOptions, {{"include-test-only", false}}}),
                                  kDevicesUsage, ctx, &args)) {
    return *done;
  }
  absl::StatusOr<OutputFormat> format = ParseOutputFormat(args->Get("format", "table"));
  if (!format.ok()) return ctx.Usage(format.status());
  bool usage_error = false;
  absl::StatusOr<std::unique_ptr<CliService>> service = Open(*args, ctx, &usage_error);
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

int Catalogs(const std::vector<std::string>& words, const Context& ctx) {
  absl::StatusOr<CliArgs> args;
  if (auto done = ParseWithoutPositionals(words, kServiceOptions, kCatalogsUsage, ctx, &args)) {
    return *done;
  }
  absl::StatusOr<OutputFormat> format = ParseOutputFormat(args->Get("format", "table"));
  if (!format.ok()) return ctx.Usage(format.status());
  bool usage_error = false;
  absl::StatusOr<std::unique_ptr<CliService>> service = Open(*args, ctx, &usage_error);
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

int Upload(const std::vector<std::string>& words, const Context& ctx) {
  absl::StatusOr<CliArgs> args = CliArgs::Parse(
      words, Concat({kRemoteOptions, {{"help", false}, {kTracedBatchFlag, true}}, kTraceOptions}));
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
  absl::StatusOr<std::unique_ptr<CliService>> service = Open(*args, ctx, &usage_error);
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

int ImportKineto(const std::vector<std::string>& words, const Context& ctx) {
  absl::StatusOr<CliArgs> args =
      CliArgs::Parse(words, Concat({{{"help", false}, {kTracedBatchFlag, true}}, kTraceOptions}));
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

int Health(const std::vector<std::string>& words, const Context& ctx) {
  absl::StatusOr<CliArgs> args;
  if (auto done = ParseWithoutPositionals(
          words,
          Concat({kRemoteOptions, {{"help", false}, {"service", true}, {"timeout-s", true}}}),
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
  using Handler = std::function<int(const std::vector<std::string>&, const Context&)>;
  struct Command {
    const char* name;
    Handler run;
  };
  const Command commands[] = {
      {"predict", Predict},
      {"devices", Devices},
      {"catalogs", Catalogs},
      {"upload", Upload},
      {"import-kineto", ImportKineto},
      {"health", Health},
  };
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const auto& c : commands) {
    if (command == c.name) return c.run(rest, Context{command, &env, &out, &err});
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
