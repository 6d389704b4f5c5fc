// What a trace's recorded operator inputs say about labels a torch.profiler
// trace does not carry: the batch size (the leading dimension the model's
// layers see) and the precision (autocast, or the dtype of the matrix
// multiplies' inputs). Heuristics, so each answer comes with its evidence
// for the user to check; no answer when the evidence is missing or split.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "habitat/v1/trace.pb.h"

namespace habitat {

template <typename T>
struct Inferred {
  T value;
  // Why, in words: "the leading dimension of 105 of 105 layer inputs".
  std::string evidence;
};

// The leading dimension of the inputs of layers that take one sample per
// row (convolutions, linear layers, normalisations, embeddings, RNNs),
// when more than half of them agree on it. Models that put the sequence
// first (RNNs with batch_first=False) can mislead it, which the evidence
// shows.
std::optional<Inferred<uint32_t>> InferBatchSize(const habitat::v1::Trace& trace);

// AMP_BF16 / AMP_FP16 when the trace's math settings say autocast ran
// (inferred from kernel names by the importer); otherwise the dtype most
// kernel-varying ops' first inputs have (matrix multiplies, convolutions,
// RNNs, attention): fp32, fp16 or bf16 (TF32 is
// a math mode, not a data type: `math` says whether fp32 ran as TF32).
std::optional<Inferred<habitat::v1::Precision>> InferPrecision(const habitat::v1::Trace& trace);

}  // namespace habitat
