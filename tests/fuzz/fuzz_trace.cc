// Fuzz target: untrusted bytes as a serialized habitat.v1.Trace, through the
// checks every uploaded or inline trace passes before anything predicts
// from it (ValidateTrace), then what the server does with a valid one:
// content id, operation classification and each operation's math mode.
#include <cstddef>
#include <cstdint>

#include "core/trace/math_mode.h"
#include "core/trace/op_classification.h"
#include "core/trace/trace_id.h"
#include "core/trace/trace_validation.h"
#include "habitat/v1/trace.pb.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  habitat::fuzz::SilenceProtobufLogs();
  habitat::v1::Trace trace;
  if (!trace.ParseFromArray(data, static_cast<int>(size))) return 0;
  // The server's defaults, and tight limits so the fuzzer reaches the
  // limit checks with small inputs.
  habitat::TraceLimits tight;
  tight.max_operations = 4;
  tight.max_kernels_per_pass = 4;
  tight.max_total_kernels = 6;
  tight.max_arguments_per_operation = 4;
  tight.max_tensor_rank = 3;
  tight.max_name_bytes = 64;
  tight.max_duration_ns = 1000000;
  const absl::Status tight_status = habitat::ValidateTrace(trace, tight);
  const absl::Status status = habitat::ValidateTrace(trace);
  // Every bound in `tight` is at most the default, so a trace within the
  // tight limits is within the defaults.
  HABITAT_FUZZ_CHECK(!tight_status.ok() || status.ok());
  HABITAT_FUZZ_CHECK(status.ok() || status.code() == absl::StatusCode::kInvalidArgument);
  HABITAT_FUZZ_CHECK(status.ok() || !status.message().empty());
  if (!status.ok()) return 0;

  const absl::StatusOr<std::string> id = habitat::ComputeTraceId(trace);
  HABITAT_FUZZ_CHECK(id.ok());
  HABITAT_FUZZ_CHECK(habitat::IsWellFormedTraceId(*id));
  for (const auto& op : trace.operations()) {
    (void)habitat::ClassifyOperation(op.name());
    if (op.has_backward()) (void)habitat::ClassifyOperation(op.backward().recorded_name());
    for (bool cudnn : {false, true}) {
      const habitat::OpMathMode mode = habitat::InferOpMathMode(trace, op, cudnn);
      HABITAT_FUZZ_CHECK(!mode.evidence.empty());
    }
  }
  (void)habitat::InferMathSettings(trace);
  return 0;
}
