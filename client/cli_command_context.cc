#include "client/cli_command_context.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_text.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/backend/prediction_backend.h"

namespace habitat {

int CommandContext::Usage(const absl::Status& status) const {
  *err << "habitat " << command << ": " << status.message() << "\n"
       << "Run 'habitat " << command << " --help' for usage.\n";
  return kExitUsage;
}

int CommandContext::Fail(const absl::Status& status) const {
  *err << "habitat " << command << ": " << status.message() << "\n";
  return kExitFailure;
}

std::vector<OptionSpec> ConcatOptions(std::initializer_list<std::vector<OptionSpec>> lists) {
  std::vector<OptionSpec> all;
  for (const auto& list : lists) all.insert(all.end(), list.begin(), list.end());
  return all;
}

const std::vector<OptionSpec> kRemoteOptions = {
    {"server", true},   {"token-file", true}, {"tls", false},           {"tls-ca", true},
    {"tls-cert", true}, {"tls-key", true},    {"tls-server-name", true}};
const std::vector<OptionSpec> kServiceOptions =
    ConcatOptions({kRemoteOptions,
                   {{"data-dir", true}, {"models-dir", true}, {"format", true}, {"help", false}}});
const std::vector<OptionSpec> kTraceOptions = {
    {"model", true}, {"batch-size", true}, {"precision", true}, {"step", true}, {"wall-ns", true}};

absl::StatusOr<CliServiceOptions> ServiceOptions(const CliArgs& args, const CommandContext& ctx) {
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

absl::StatusOr<std::unique_ptr<CliService>> OpenService(const CliArgs& args,
                                                        const CommandContext& ctx,
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

absl::StatusOr<TraceLoadOptions> UploadTraceOptions(const CliArgs& args,
                                                    const CommandContext& ctx) {
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

void PrintNotes(const TraceLoadReport& report, const CommandContext& ctx) {
  if (ctx.quiet) return;
  for (const std::string& note : report.notes) *ctx.err << Wrap("note: ", note, kTableWidth, 2);
}

absl::StatusOr<v1::Trace> LoadTrace(const std::string& path, const TraceLoadOptions& options,
                                    const CommandContext& ctx) {
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

std::optional<int> ParseWithoutPositionals(const std::vector<std::string>& words,
                                           const std::vector<OptionSpec>& options,
                                           const char* usage, const CommandContext& ctx,
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

}  // namespace habitat
