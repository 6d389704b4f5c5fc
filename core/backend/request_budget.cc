#include "core/backend/request_budget.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/trace/parsed_size.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {
namespace {

// An OperationPrediction without its name: index, four times, method, two
// math modes, the error and the flags, at their smallest varints.
constexpr int64_t kOperationWireBytes = 24;
// The same in memory: the generated class, its heap name and the malloc
// overhead of both.
int64_t OperationMemoryBytes() {
  static const int64_t bytes =
      static_cast<int64_t>(v1::OperationPrediction::default_instance().SpaceUsedLong()) +
      static_cast<int64_t>(sizeof(std::string)) + 2 * 16;
  return bytes;
}

int64_t NameBytes(const v1::Trace& trace) {
  int64_t bytes = 0;
  for (const v1::Operation& op : trace.operations())
    bytes += static_cast<int64_t>(op.name().size());
  return bytes;
}

}  // namespace

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

int64_t BreakdownBytesAtLeast(const v1::Trace& trace, int64_t gpus) {
  return gpus * (NameBytes(trace) + kOperationWireBytes * trace.operations_size());
}

int64_t PredictMemoryBytes(const v1::Trace& trace, const PredictShape& shape) {
  int64_t bytes = shape.copies_trace ? InMemoryBytes(trace) : 0;
  if (shape.include_breakdown) {
    bytes += 2 * shape.gpus * (NameBytes(trace) + OperationMemoryBytes() * trace.operations_size());
    bytes += BreakdownBytesAtLeast(trace, shape.gpus);
  }
  return bytes;
}

absl::Status CheckPredictFits(const v1::Trace& trace, const PredictShape& shape,
                              int64_t max_response_bytes, int64_t max_memory_bytes) {
  if (shape.include_breakdown && max_response_bytes > 0) {
    const int64_t breakdown = BreakdownBytesAtLeast(trace, shape.gpus);
    if (breakdown > max_response_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the breakdown of ", trace.operations_size(), " operations on ", shape.gpus,
          " GPUs would be at least ", MiB(breakdown), ", above the server's message limit of ",
          MiB(max_response_bytes), " (--max_message_mb) by ", MiB(breakdown - max_response_bytes),
          ", so it was not computed: ask for fewer GPUs (devices), or leave include_breakdown "
          "off"));
    }
  }
  if (max_memory_bytes <= 0) return absl::OkStatus();
  const int64_t needed = PredictMemoryBytes(trace, shape);
  if (needed > max_memory_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "predicting this trace", shape.include_breakdown ? " with the breakdown" : "",
        shape.copies_trace ? " at another batch size" : "", " on ", shape.gpus,
        " GPUs needs about ", MiB(needed), " of memory, above the server's per-request limit of ",
        MiB(max_memory_bytes), " (--request_memory_mib) by ", MiB(needed - max_memory_bytes),
        ": ask for fewer GPUs (devices), leave include_breakdown off, or send a smaller trace"));
  }
  return absl::OkStatus();
}

}  // namespace habitat
