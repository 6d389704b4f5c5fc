// Peak GPU memory at another batch size, and whether it fits a GPU, from
// the memory the trace recorded (Trace.memory):
//
//   peak(b) = start + max over candidates of (fixed + batch * b / b0)
//
// `start` is what was allocated when the iteration began (weights,
// gradients, optimizer state: independent of the batch). Where the agent
// read the allocator around each pass, the candidates and their split come
// from those readings (memory_timeline.h); otherwise the one candidate is
// the traced peak, all of it taken to grow with the batch (activations,
// their gradients, temporaries). How far off the peak is, per pass and
// from the start and peak alone, against the H100 batch_memory fixtures:
// docs/memory_prediction.md, section "Evaluation". Memory is taken to be the
// same on every GPU: the same allocations, only library workspaces differ.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "core/predict/memory_timeline.h"
#include "habitat/v1/device.pb.h"
#include "habitat/v1/prediction_service.pb.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

// Expected absolute error of a predicted peak, percent, per doubling or
// halving of the batch. From the start and the peak alone: the fixtures'
// MAPE. From per-pass readings: the largest single error at 4x per
// doubling, not the (lower) MAPE, since the fit headroom below rests on it
// and the allocator's fragmentation at large batches is not in the peak.
// The measured errors: docs/memory_prediction.md, section "Evaluation".
inline constexpr double kMemoryErrorPercentPerDoubling = 5.0;
inline constexpr double kPerPassMemoryErrorPercentPerDoubling = 1.5;

// A batch fits when its batch-dependent part, with twice its expected
// error added, fits: the headroom under which no batch predicted to fit the
// H100 ran out of memory in the fixtures' largest-batch runs (some did
// with none), at the price of a few predicted one step too small
// (docs/memory_prediction.md, sections "The model" and "Evaluation").
inline constexpr double kMemoryFitHeadroomErrors = 2.0;

// Device memory outside PyTorch's allocator: the CUDA context and library
// handles, as measured on the H100 from the out-of-memory messages in
// tests/testdata/batch_memory (docs/memory_prediction.md, section "The
// model"), rounded up.
inline constexpr int64_t kCudaContextReserveBytes = int64_t{1} << 30;

// The driver's total as a share of the datasheet capacity, for GPUs with
// no driver report in the spec database: GDDR cards with ECC on report
// less than HBM GPUs (docs/memory_prediction.md, section "The model"), so
// their share is the safe default.
inline constexpr double kDefaultDriverMemoryShare = 0.93;

// What the trace says about its memory.
struct MemoryModel {
  int64_t start_bytes = 0;
  int64_t traced_peak_bytes = 0;
  uint32_t traced_batch = 0;
  // Candidate peaks above the start at the traced batch (PeakCandidates),
  // or the one {0, traced peak - start}.
  std::vector<MemoryPoint> candidates;
  // The candidates come from per-pass readings (expected error
  // kPerPassMemoryErrorPercentPerDoubling, else kMemoryErrorPercentPerDoubling).
  bool per_pass = false;
};

// The trace's memory model; nullopt (with `why` set, when given) when the
// trace lacks what it needs: an allocated-at-start and a peak, and a batch.
std::optional<MemoryModel> MemoryModelFor(const habitat::v1::Trace& trace,
                                          std::string* why = nullptr);

// Predicted peak allocated bytes at `batch` (> 0).
int64_t PredictPeakBytes(const MemoryModel& model, uint32_t batch);

// Expected error of PredictPeakBytes at `batch`, percent.
double MemoryErrorPercent(const MemoryModel& model, uint32_t batch);

// What a process may allocate on `device`: the driver's total (or the
// datasheet capacity derated) less kCudaContextReserveBytes.
int64_t UsableMemoryBytes(const habitat::v1::DeviceSpec& device);

// What the batch-dependent bytes at `batch` are multiplied by for a fit:
// 1 + kMemoryFitHeadroomErrors expected errors.
double MemoryFitHeadroom(const MemoryModel& model, uint32_t batch);

// Whether `batch` fits in `usable` bytes with the headroom above.
bool FitsMemory(const MemoryModel& model, uint32_t batch, int64_t usable);

// The largest batch on LargestFittingBatch's grid for which `fits` holds, which it must
// for a prefix of the grid (a peak that grows with the batch); 0 when it
// holds for none.
uint32_t LargestBatchWhere(const MemoryModel& model, uint32_t step,
                           absl::FunctionRef<bool(uint32_t)> fits);

// The grid's smallest batch; 0 when the grid is empty.
uint32_t SmallestGridBatch(const MemoryModel& model, uint32_t step);

// The largest batch on the grid (powers of two when `step` is 0, else
// multiples of `step`) within kMaxBatchScale of the traced batch either
// way that fits; 0 when none does.
uint32_t LargestFittingBatch(const MemoryModel& model, int64_t usable, uint32_t step);

// DevicePrediction.memory for `device` at `batch`; `largest_fitting_batch`
// is LargestFittingBatch's for the device, which the caller has computed.
habitat::v1::MemoryPrediction PredictMemory(const MemoryModel& model, uint32_t batch,
                                            const habitat::v1::DeviceSpec& device,
                                            uint32_t largest_fitting_batch);

}  // namespace habitat
