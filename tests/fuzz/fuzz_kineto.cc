// Fuzz target: untrusted bytes as a torch.profiler (Kineto) Chrome trace,
// through the importer the CLI and agent use, then the server's checks on
// the trace it produced.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "core/kineto/kineto_import.h"
#include "core/trace/trace_validation.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  habitat::KinetoImportOptions options;
  options.model_name = "fuzz";
  options.batch_size = 8;
  options.precision = habitat::v1::PRECISION_FP32;
  const absl::StatusOr<habitat::v1::Trace> trace = habitat::ImportKinetoTrace(json, options);
  if (!trace.ok()) {
    // Bad input is the caller's fault: INVALID_ARGUMENT with a message.
    HABITAT_FUZZ_CHECK(trace.status().code() == absl::StatusCode::kInvalidArgument);
    HABITAT_FUZZ_CHECK(!trace.status().message().empty());
    return 0;
  }
  // What the import wrote must survive the wire and the server's checks
  // (which may reject it, e.g. a kernel with a zero grid, but not crash).
  std::string bytes;
  HABITAT_FUZZ_CHECK(trace->SerializeToString(&bytes));
  const absl::Status status = habitat::ValidateTrace(*trace);
  HABITAT_FUZZ_CHECK(status.ok() || status.code() == absl::StatusCode::kInvalidArgument);
  return 0;
}
