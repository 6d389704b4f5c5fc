#include "client/cli_predict_command.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli_output.h"
#include "client/cli_plot.h"
#include "client/cli_warnings.h"
#include "common/status_macros.h"
#include "core/backend/prediction_backend.h"
#include "core/devices/text_proto_file.h"
#include "core/trace/trace_id.h"

namespace habitat {
namespace {

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
    "                         data, as the habitat agent records), ranked by cost; with\n"
    "                         --gpus N --parallel fsdp: the largest batch per GPU that fits\n"
    "                         sharded over them, and the fewest GPUs it fits on\n"
    "  --fit-step N           with --fit: the batches are multiples of N instead\n"
    "  --plot FILE            also draw samples/s against price per GPU-hour, the Pareto\n"
    "                         front marked, to FILE.svg or FILE.png (with the Python\n"
    "                         client and matplotlib: pip install './client/python[plot]')\n"
    "  --gpus N               also predict a data-parallel step (PyTorch DDP over NCCL) on\n"
    "                         N GPUs of each kind in one node, each at the batch above\n"
    "  --nodes M              ... on M such nodes (the network from the catalog's instance)\n"
    "  --bucket-mb B          DDP's bucket_cap_mb (default 25)\n"
    "  --parallel ddp|fsdp    with --gpus: DDP (default) or FSDP2 (fully_shard: parameters,\n"
    "                         gradients and optimizer state sharded; peak memory per GPU);\n"
    "                         TRACE may be one rank of an FSDP run (a model too large for\n"
    "                         one GPU): predicted from it\n"
    "  --fsdp-units U         with --parallel fsdp: the units the parameters are cut into, in\n"
    "                         forward order, of about equal bytes\n"
    "  --fsdp-wrap CLASS      ... or the module class fully_shard wraps (e.g. GPT2Block),\n"
    "                         for a trace the agent took with OperationTracker(model=...);\n"
    "                         by default such a trace is wrapped per repeated block, any\n"
    "                         other in 16 units\n"
    "  --no-nvls              all-reduces without NVLink SHARP (as NCCL_NVLS_ENABLE=0);\n"
    "                         by default NVLS is used where the node has it and it is\n"
    "                         faster, as NCCL does\n"
    "  --instances            also predict one node of every multi-GPU instance size the\n"
    "                         catalog offers each GPU in (but the --gpus one), with the\n"
    "                         same --bucket-mb and --no-nvls\n";

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
  HABITAT_ASSIGN_OR_RETURN(std::optional<int64_t> fsdp_units,
                           args.GetInt("fsdp-units", 1, kMaxFsdpUnits));
  if (!gpus.has_value() &&
      (nodes.has_value() || bucket_mb.has_value() || args.Has("no-nvls") || args.Has("parallel"))) {
    return absl::InvalidArgumentError(
        "--nodes, --bucket-mb, --no-nvls and --parallel describe a data-parallel "
        "configuration: give --gpus N too");
  }
  const std::string kind = absl::AsciiStrToLower(args.Get("parallel"));
  if (!kind.empty() && kind != "ddp" && kind != "fsdp") {
    return absl::InvalidArgumentError(
        absl::StrCat("--parallel takes ddp or fsdp, not '", args.Get("parallel"),
                     "' (hybrid sharding, tensor and pipeline parallelism are not modelled)"));
  }
  if ((fsdp_units.has_value() || args.Has("fsdp-wrap")) && kind != "fsdp") {
    return absl::InvalidArgumentError(
        "--fsdp-units and --fsdp-wrap cut an FSDP model; give --parallel fsdp");
  }
  if (fsdp_units.has_value() && args.Has("fsdp-wrap")) {
    return absl::InvalidArgumentError("--fsdp-units and --fsdp-wrap both cut the units: give one");
  }
  if (gpus.has_value()) {
    v1::ParallelConfig* config = request->add_parallel();
    config->set_gpus_per_node(static_cast<uint32_t>(*gpus));
    if (kind == "fsdp") config->set_kind(v1::ParallelConfig::KIND_FULLY_SHARDED);
    if (fsdp_units.has_value()) config->set_fsdp_units(static_cast<uint32_t>(*fsdp_units));
    config->set_fsdp_wrap(args.Get("fsdp-wrap"));
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
const std::vector<OptionSpec> kPredictOptions = ConcatOptions(
    {kServiceOptions,
     kTraceOptions,
     {{"devices", true},       {"catalog", true},    {"catalog-file", true}, {"spot", false},
      {"breakdown", false},    {"top", true},        {"host-speed", true},   {"fit", false},
      {"fit-step", true},      {"plot", true},       {"gpus", true},         {"nodes", true},
      {"bucket-mb", true},     {"no-nvls", false},   {"parallel", true},     {"fsdp-units", true},
      {"fsdp-wrap", true},     {"instances", false}, {"explain", false},     {"quiet", false, 'q'},
      {kTracedBatchFlag, true}}});

// How the table mode prints its warnings on stderr: one line per kind
// (`explain`: with each warning's full text), or none with -q.
constexpr char kWarningsHint[] = "--explain for the details, -q to hide them";

int PrintPrediction(v1::PredictResponse response, const PredictionHeader& header,
                    OutputFormat format, const CliArgs& args, std::optional<int64_t> top,
                    const CommandContext& ctx) {
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

// Opens the service, checks that a plot has prices before the work,
// predicts, prints the response in `format` and draws the plot.
int PredictAndPrint(const CliArgs& args, const v1::PredictRequest& request, PredictionHeader header,
                    OutputFormat format, std::optional<int64_t> top, const CommandContext& ctx) {
  bool usage_error = false;
  absl::StatusOr<std::unique_ptr<CliService>> service = OpenService(args, ctx, &usage_error);
  if (!service.ok()) return usage_error ? ctx.Usage(service.status()) : ctx.Fail(service.status());
  if (args.Has("plot")) {
    // Where the catalogs cannot be listed, Predict fails the same way.
    absl::StatusOr<v1::ListCatalogsResponse> catalogs = (*service)->ListCatalogs();
    if (catalogs.ok()) {
      if (absl::Status priced = CheckPlotPrices(request, *catalogs); !priced.ok()) {
        return ctx.Usage(priced);
      }
    }
  }
  absl::StatusOr<v1::PredictResponse> response = (*service)->Predict(request);
  if (!response.ok()) return ctx.Fail(response.status());
  // By trace id there was no trace to read these from.
  if (header.model_name.empty()) header.model_name = response->model_name();
  if (header.precision.empty() && response->precision() != v1::PRECISION_UNSPECIFIED) {
    header.precision = PrecisionName(response->precision());
  }
  // A plot that fails costs the plot, not the prediction: the table first,
  // then why there is no plot (even with -q: the user asked for it).
  absl::Status drawn = absl::OkStatus();
  if (args.Has("plot")) drawn = PlotPrediction(*response, header.model_name, args.Get("plot"));
  const int code = PrintPrediction(*std::move(response), header, format, args, top, ctx);
  if (!drawn.ok()) {
    *ctx.err << "warning: no plot: " << drawn.message() << "\n";
  } else if (args.Has("plot") && !ctx.quiet) {
    *ctx.err << "plot written to " << args.Get("plot") << "\n";
  }
  return code;
}

}  // namespace

int RunPredictCommand(const std::vector<std::string>& words, const CommandContext& parent) {
  CommandContext ctx = parent;
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

  return PredictAndPrint(*args, request, std::move(header), *format, *top, ctx);
}

}  // namespace habitat
