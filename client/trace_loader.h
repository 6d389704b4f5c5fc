// Reading and writing trace files for the CLI: a binary habitat.v1.Trace or
// a torch.profiler (Kineto) JSON trace, either one optionally gzipped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// The most a gzipped trace file may inflate to: far above any one-iteration
// trace (the JSON fixtures in tests/testdata are 2-5 MB), far below what
// a small file of zeros inflates to (10 MB of gzip: 10 GB).
inline constexpr size_t kMaxInflatedTraceBytes = size_t{1} << 30;

struct TraceLoadOptions {
  // Used only when the file is Kineto JSON; a binary trace carries its own.
  // Empty: the file name without directory and extensions.
  std::string model_name;
  // The batch the trace ran at; 0: the trace's own, else inferred from its
  // shapes, else `fallback_batch_size`.
  uint32_t batch_size = 0;
  uint32_t fallback_batch_size = 0;
  // The CLI flag that sets batch_size, named in the notes.
  std::string batch_flag = "--batch-size";
  habitat::v1::Precision precision = habitat::v1::PRECISION_UNSPECIFIED;
  std::optional<int64_t> iteration_wall_ns;
  std::optional<int64_t> profiler_step;
  // A gzipped file that inflates to more is refused (INVALID_ARGUMENT).
  size_t max_inflated_bytes = kMaxInflatedTraceBytes;
};

// The kind of content LoadTraceFile found.
enum class TraceFileKind { kBinaryTrace, kKinetoJson };

// What LoadTraceFile found, and what it told the user it inferred.
struct TraceLoadReport {
  TraceFileKind kind = TraceFileKind::kBinaryTrace;
  // One sentence per label a JSON trace did not carry and the loader
  // inferred from its operators' inputs (batch size, precision), or per
  // option that disagrees with what they show; for the user to check.
  std::vector<std::string> notes;
};

// Reads `path` (gzip inflated transparently). Content whose first
// non-whitespace character is '{' or '[' is imported as Kineto JSON;
// anything else must parse as a binary habitat.v1.Trace. Errors name the
// file. A JSON trace's batch size and precision come from the options when
// given, else from InferBatchSize / InferPrecision (core/trace/
// trace_inference.h), saying so in `report` (when not null).
absl::StatusOr<habitat::v1::Trace> LoadTraceFile(const std::string& path,
                                                 const TraceLoadOptions& options,
                                                 TraceLoadReport* report = nullptr);

// Writes the binary proto atomically; gzipped when `path` ends in ".gz".
absl::Status SaveTraceFile(const std::string& path, const habitat::v1::Trace& trace);

// "resnet50" for "/x/resnet50.json.gz", "a.b" for "a.b.pb": the base name
// without the trace-file extensions (.gz, .json, .pb, .trace, .binpb).
std::string TraceFileStem(const std::string& path);

// Parses "fp32", "tf32", "fp16", "bf16", "amp_fp16", "amp_bf16" (case
// insensitive); INVALID_ARGUMENT listing the accepted names otherwise.
absl::StatusOr<habitat::v1::Precision> ParsePrecision(const std::string& text);
// The inverse of ParsePrecision; "unspecified" for PRECISION_UNSPECIFIED.
std::string PrecisionName(habitat::v1::Precision precision);

}  // namespace habitat
