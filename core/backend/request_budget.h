// What a Predict will hold in memory and send, bounded from the request and
// the trace before any of it is computed: a 63 MB inline trace with the
// breakdown once built a 660 MB answer (1.77 GB peak) only to have gRPC
// refuse to send it.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

struct PredictShape {
  // GPUs predicted.
  int64_t gpus = 0;
  bool include_breakdown = false;
  // The engine predicts from a copy of the trace scaled to another batch
  // (PredictRequest.batch_size or fit).
  bool copies_trace = false;
};

// The least the serialised breakdown of `trace` on `gpus` GPUs takes: each
// operation's name and a few varints per GPU.
int64_t BreakdownBytesAtLeast(const habitat::v1::Trace& trace, int64_t gpus);

// Memory predicting takes beyond the trace itself: the copy scaled to
// another batch, and with the breakdown each operation's prediction per GPU
// twice in memory (the cache's and the response's) and once serialised.
int64_t PredictMemoryBytes(const habitat::v1::Trace& trace, const PredictShape& shape);

// RESOURCE_EXHAUSTED, naming the limit, its flag and by how much, when a
// Predict of this shape cannot fit `max_response_bytes` (the breakdown) or
// `max_memory_bytes`; 0 turns either check off.
absl::Status CheckPredictFits(const habitat::v1::Trace& trace, const PredictShape& shape,
                              int64_t max_response_bytes, int64_t max_memory_bytes);

// Bytes as MiB with one decimal, for messages.
std::string MiB(int64_t bytes);

}  // namespace habitat
