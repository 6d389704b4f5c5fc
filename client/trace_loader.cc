#include "client/trace_loader.h"

#include <array>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/json_text.h"
#include "common/status_macros.h"
#include "core/kineto/kineto_import.h"
#include "core/trace/trace_inference.h"

namespace habitat {
namespace {

struct PrecisionName {
  const char* name;
  v1::Precision value;
};
constexpr std::array<PrecisionName, 6> kPrecisions = {{
    {"fp32", v1::PRECISION_FP32},
    {"tf32", v1::PRECISION_TF32},
    {"fp16", v1::PRECISION_FP16},
    {"bf16", v1::PRECISION_BF16},
    {"amp_fp16", v1::PRECISION_AMP_FP16},
    {"amp_bf16", v1::PRECISION_AMP_BF16},
}};

// A parse that "succeeds" on arbitrary bytes (protobuf accepts many) still
// yields nothing a trace must have; treat that as not a trace.
bool LooksLikeTrace(const v1::Trace& trace) {
  return trace.has_origin() || !trace.model_name().empty() || trace.operations_size() > 0 ||
         trace.unattributed_kernels_size() > 0 || trace.format_version() > 0;
}

// Labels a torch.profiler trace does not record, from its operators'
// inputs. An option the user gave wins over the inference (which can be
// misled, e.g. by a sequence-first RNN), with a note when they disagree.
void ApplyInferredLabels(const TraceLoadOptions& options, v1::Trace* trace,
                         std::vector<std::string>* notes) {
  if (auto batch = InferBatchSize(*trace)) {
    if (options.batch_size == 0) {
      trace->set_batch_size(batch->value);
      notes->push_back(absl::StrCat("batch size ", batch->value, " inferred from ", batch->evidence,
                                    "; ", options.batch_flag, " N sets another"));
    } else if (options.batch_size != batch->value) {
      notes->push_back(absl::StrCat(options.batch_flag, " ", options.batch_size,
                                    " is used, although ", batch->evidence, " is ", batch->value));
    }
  }
  if (trace->batch_size() == 0 && options.fallback_batch_size > 0) {
    trace->set_batch_size(options.fallback_batch_size);
    notes->push_back(absl::StrCat("the trace's shapes do not show its batch size; taken to be ",
                                  options.fallback_batch_size, " (", options.batch_flag,
                                  " N sets it)"));
  }
  if (auto precision = InferPrecision(*trace)) {
    if (options.precision == v1::PRECISION_UNSPECIFIED) {
      trace->set_precision(precision->value);
      notes->push_back(absl::StrCat("precision ", habitat::PrecisionName(precision->value),
                                    " inferred from ", precision->evidence,
                                    "; --precision P sets another"));
    } else if (options.precision != precision->value) {
      notes->push_back(absl::StrCat("--precision ", habitat::PrecisionName(options.precision),
                                    " is used, although ", precision->evidence, " suggests ",
                                    habitat::PrecisionName(precision->value)));
    }
  }
}

}  // namespace

std::string TraceFileStem(const std::string& path) {
  std::string stem = path;
  const size_t slash = stem.find_last_of('/');
  if (slash != std::string::npos) stem = stem.substr(slash + 1);
  // Strip known extensions from the end, repeatedly (".json.gz").
  static constexpr const char* kExtensions[] = {".gz", ".json", ".pb", ".binpb", ".trace"};
  bool stripped = true;
  while (stripped) {
    stripped = false;
    for (const char* ext : kExtensions) {
      if (stem.size() > std::string(ext).size() && absl::EndsWithIgnoreCase(stem, ext)) {
        stem.resize(stem.size() - std::string(ext).size());
        stripped = true;
      }
    }
  }
  return stem;
}

absl::StatusOr<v1::Precision> ParsePrecision(const std::string& text) {
  const std::string lower = absl::AsciiStrToLower(text);
  std::vector<std::string> names;
  for (const auto& entry : kPrecisions) {
    if (lower == entry.name) return entry.value;
    names.push_back(entry.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown precision '", text, "'; expected one of ", absl::StrJoin(names, ", ")));
}

std::string PrecisionName(v1::Precision precision) {
  for (const auto& entry : kPrecisions) {
    if (entry.value == precision) return entry.name;
  }
  return "unspecified";
}

absl::StatusOr<v1::Trace> LoadTraceFile(const std::string& path, const TraceLoadOptions& options,
                                        TraceLoadReport* report) {
  TraceLoadReport unused;
  if (report == nullptr) report = &unused;
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is a directory; expected a trace file"));
  }
  absl::StatusOr<std::string> contents = ReadFile(path, options.max_inflated_bytes);
  if (absl::IsResourceExhausted(contents.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the gzip data inflates to more than ", options.max_inflated_bytes >> 20,
        " MiB, far more than a trace of one training iteration; not loaded"));
  }
  if (!contents.ok()) {
    // ReadFile's message names the file already; keep its code.
    return contents.status();
  }
  if (absl::StripAsciiWhitespace(StripUtf8Bom(*contents)).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": the file is empty; expected a habitat trace (binary "
                     "habitat.v1.Trace) or a torch.profiler JSON trace"));
  }
  if (StartsLikeJson(*contents)) {
    KinetoImportOptions import;
    import.model_name = options.model_name.empty() ? TraceFileStem(path) : options.model_name;
    import.batch_size = options.batch_size;
    import.precision = options.precision;
    if (options.iteration_wall_ns.has_value()) {
      import.iteration_wall_ns = Nanoseconds(*options.iteration_wall_ns);
    }
    import.profiler_step = options.profiler_step;
    absl::StatusOr<v1::Trace> trace = ImportKinetoTrace(*contents, import);
    if (!trace.ok()) {
      return absl::Status(trace.status().code(),
                          absl::StrCat(path, ": cannot import the torch.profiler JSON trace: ",
                                       trace.status().message()));
    }
    report->kind = TraceFileKind::kKinetoJson;
    ApplyInferredLabels(options, &*trace, &report->notes);
    return trace;
  }
  v1::Trace trace;
  if (!trace.ParseFromString(*contents) || !LooksLikeTrace(trace)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": not a habitat trace or a torch.profiler JSON trace (it is neither "
                     "JSON nor a binary habitat.v1.Trace)"));
  }
  report->kind = TraceFileKind::kBinaryTrace;
  return trace;
}

absl::Status SaveTraceFile(const std::string& path, const v1::Trace& trace) {
  std::string bytes;
  if (!trace.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat(path, ": cannot serialise the trace"));
  }
  if (absl::EndsWith(path, ".gz")) {
    HABITAT_ASSIGN_OR_RETURN(bytes, Gzip(bytes));
  }
  return WriteFileAtomically(path, bytes);
}

}  // namespace habitat
