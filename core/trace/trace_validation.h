// Checks a trace before anything predicts from it, so bad input becomes an
// INVALID_ARGUMENT naming the offending field instead of a wrong answer.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// Samples per iteration beyond 2^30 describe no training job, and make
// throughput and cost per sample meaningless.
inline constexpr uint32_t kMaxBatchSize = uint32_t{1} << 30;

// Limits on what one trace may hold: every repeated field is counted. The
// defaults are far above any real training iteration (a GPT-style model has
// ~10^4 ops, ~10^5 kernels and fewer host events than kernels).
struct TraceLimits {
  int64_t max_operations = 200000;
  int64_t max_kernels_per_pass = 10000;
  int64_t max_memory_activities_per_pass = 10000;
  // Kernels and memory activities of all passes plus the unattributed
  // kernels.
  int64_t max_total_kernels = 2000000;
  int64_t max_host_events = 1000000;
  int64_t max_metadata_entries = 1024;
  // The model's modules (a 70B transformer has a few thousand).
  int64_t max_modules = 1000000;
  int64_t max_arguments_per_operation = 256;
  int64_t max_tensor_rank = 16;
  // Values of one integer-list argument (sizes, strides, split sizes).
  int64_t max_argument_values = 4096;
  // Templated kernel names run to several KiB (5,050 bytes for one in DCGAN).
  int64_t max_name_bytes = 65536;
  // Re-runs of one pass at other batch sizes (the agent measures a few).
  int64_t max_batch_reruns_per_pass = 16;
  // One kernel or pass longer than this is not a measurement we trust.
  int64_t max_duration_ns = int64_t{3600} * 1000 * 1000 * 1000;
};

// Returns OK or INVALID_ARGUMENT with a message like
// "operations[12].forward.kernels[3].duration_ns must be >= 0 (got -5)".
absl::Status ValidateTrace(const habitat::v1::Trace& trace,
                           const TraceLimits& limits = TraceLimits());

}  // namespace habitat
