// What every `habitat` subcommand shares: its streams and how it reports
// misuse (CommandContext), the options for reaching the service and for
// reading a trace file, opening the service, and loading a trace.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cli_args.h"
#include "client/cli_commands.h"
#include "client/cli_service.h"
#include "client/trace_loader.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// One subcommand's run: the streams and what to print on misuse.
struct CommandContext {
  std::string command;
  const CliEnvironment* env;
  std::ostream* out;
  std::ostream* err;
  // -q: no warnings or notes on `err` (errors still).
  bool quiet = false;

  // Prints the status and where the usage is; kExitUsage.
  int Usage(const absl::Status& status) const;
  // Prints the status; kExitFailure.
  int Fail(const absl::Status& status) const;
};

std::vector<OptionSpec> ConcatOptions(std::initializer_list<std::vector<OptionSpec>> lists);

// How to reach a server: address, token and TLS.
extern const std::vector<OptionSpec> kRemoteOptions;
// kRemoteOptions, and the in-process service's and output's.
extern const std::vector<OptionSpec> kServiceOptions;
// What a trace file does not say itself (predict, upload, import-kineto).
extern const std::vector<OptionSpec> kTraceOptions;
// The batch the trace ran at, where --batch-size is the batch to predict at.
inline constexpr char kTracedBatchFlag[] = "traced-batch-size";

// Reads the remote options. Token and TLS options need --server: they would
// be silently ignored in-process. INVALID_ARGUMENT is a usage error.
absl::StatusOr<CliServiceOptions> ServiceOptions(const CliArgs& args, const CommandContext& ctx);

// The token comes from --token-file or $HABITAT_TOKEN, never from the
// command line (it would show in `ps` and shell history).
absl::Status ReadToken(const CliArgs& args, CliServiceOptions* options);

// Opens the service; `usage_error` is set when the failure is the command
// line's fault.
absl::StatusOr<std::unique_ptr<CliService>> OpenService(const CliArgs& args,
                                                        const CommandContext& ctx,
                                                        bool* usage_error);

// Parses the trace-loading options shared by predict, upload and import.
// `batch_flag` names the trace's own batch: "traced-batch-size", or
// "batch-size" where upload and import-kineto are given its old name.
absl::StatusOr<TraceLoadOptions> TraceOptions(const CliArgs& args, const char* batch_flag);

// upload's and import-kineto's trace options. The trace's own batch is
// --traced-batch-size there as in predict, where --batch-size is the batch
// to predict at; --batch-size, its name there before, still works, with a
// note.
absl::StatusOr<TraceLoadOptions> UploadTraceOptions(const CliArgs& args, const CommandContext& ctx);

// What the loader inferred, on stderr (unless -q): the user should see a
// guessed label.
void PrintNotes(const TraceLoadReport& report, const CommandContext& ctx);

// Loads a trace file and applies explicitly given overrides to binary traces
// too (a JSON import already took them). Prints what the loader inferred.
absl::StatusOr<habitat::v1::Trace> LoadTrace(const std::string& path,
                                             const TraceLoadOptions& options,
                                             const CommandContext& ctx);

bool IsFile(const std::string& path);

// Parses the options of a command that takes no positional arguments into
// `args`. Returns the exit code when the command ends here: --help printed
// `usage`, or the command line was wrong.
std::optional<int> ParseWithoutPositionals(const std::vector<std::string>& words,
                                           const std::vector<OptionSpec>& options,
                                           const char* usage, const CommandContext& ctx,
                                           absl::StatusOr<CliArgs>* args);

}  // namespace habitat
