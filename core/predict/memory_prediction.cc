#include "core/predict/memory_prediction.h"

#include <algorithm>
#include <cmath>

#include "core/predict/batch_scaling.h"
#include "core/trace/trace_validation.h"

namespace habitat {

std::optional<MemoryModel> MemoryModelFor(const v1::Trace& trace, std::string* why) {
  auto fail = [why](const char* reason) -> std::optional<MemoryModel> {
    if (why != nullptr) *why = reason;
    return std::nullopt;
  };
  if (!trace.has_memory()) {
    return fail(
        "the trace has no memory data (a trace from the habitat agent records it; a Kineto "
        "profile needs profile_memory=True)");
  }
  const v1::MemoryUsage& memory = trace.memory();
  if (!memory.has_allocated_bytes_at_start() || !memory.has_peak_allocated_bytes()) {
    return fail(
        "the trace's memory data lacks what was allocated when the iteration began or its "
        "peak");
  }
  if (trace.batch_size() == 0) return fail("the trace records no batch size");
  MemoryModel model;
  model.start_bytes = memory.allocated_bytes_at_start();
  // Validation keeps both non-negative; a peak below the start (memory
  // freed during the iteration) leaves nothing that grows with the batch.
  model.traced_peak_bytes = std::max(memory.peak_allocated_bytes(), model.start_bytes);
  model.traced_batch = trace.batch_size();
  if (std::optional<std::vector<MemoryPoint>> candidates = PeakCandidates(trace)) {
    model.candidates = *std::move(candidates);
    model.per_pass = true;
  } else {
    model.candidates = {
        MemoryPoint{0, static_cast<double>(model.traced_peak_bytes - model.start_bytes)}};
  }
  return model;
}

namespace {

double BatchRatio(const MemoryModel& model, uint32_t batch) {
  return static_cast<double>(batch) / static_cast<double>(model.traced_batch);
}

// The peak above the start at `batch`, its batch-dependent parts times
// `headroom`.
double PeakAboveStart(const MemoryModel& model, uint32_t batch, double headroom) {
  const double ratio = BatchRatio(model, batch);
  double peak = 0;
  for (const MemoryPoint& p : model.candidates) {
    peak = std::max(peak, p.fixed_bytes + p.batch_bytes * ratio * headroom);
  }
  return peak;
}

double ErrorPercentAt(const MemoryModel& model, uint32_t batch) {
  const double per_doubling =
      model.per_pass ? kPerPassMemoryErrorPercentPerDoubling : kMemoryErrorPercentPerDoubling;
  return per_doubling * std::abs(std::log2(BatchRatio(model, batch)));
}

int64_t SaturatingBytes(double bytes) {
  constexpr double kMax = 9.0e18;  // below INT64_MAX, exactly representable
  return static_cast<int64_t>(std::min(std::round(bytes), kMax));
}

}  // namespace

int64_t PredictPeakBytes(const MemoryModel& model, uint32_t batch) {
  return SaturatingBytes(static_cast<double>(model.start_bytes) + PeakAboveStart(model, batch, 1));
}

double MemoryErrorPercent(const MemoryModel& model, uint32_t batch) {
  return ErrorPercentAt(model, batch);
}

int64_t UsableMemoryBytes(const v1::DeviceSpec& device) {
  const double total = device.driver_memory_bytes() > 0
                           ? static_cast<double>(device.driver_memory_bytes())
                           : static_cast<double>(device.memory_bytes()) * kDefaultDriverMemoryShare;
  return std::max<int64_t>(0, SaturatingBytes(total) - kCudaContextReserveBytes);
}

double MemoryFitHeadroom(const MemoryModel& model, uint32_t batch) {
  return 1.0 + kMemoryFitHeadroomErrors * ErrorPercentAt(model, batch) / 100.0;
}

bool FitsMemory(const MemoryModel& model, uint32_t batch, int64_t usable) {
  return static_cast<double>(model.start_bytes) +
             PeakAboveStart(model, batch, MemoryFitHeadroom(model, batch)) <=
         static_cast<double>(usable);
}

namespace {

// The candidate batches, in increasing order: candidate(i) for i in
// [first, last]; empty when last < first.
struct BatchGrid {
  uint32_t step = 0;  // 0: powers of two
  int64_t first = 0;
  int64_t last = -1;

  uint32_t At(int64_t i) const {
    return step == 0 ? uint32_t{1} << i : static_cast<uint32_t>(i * step);
  }
};

BatchGrid GridFor(const MemoryModel& model, uint32_t step) {
  const double traced = model.traced_batch;
  const int64_t lo = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(traced / kMaxBatchScale)));
  const int64_t hi =
      std::min<int64_t>(kMaxBatchSize, static_cast<int64_t>(traced * kMaxBatchScale));
  BatchGrid grid;
  grid.step = step;
  if (step == 0) {
    while ((int64_t{1} << grid.first) < lo) ++grid.first;
    grid.last = grid.first - 1;
    while ((int64_t{1} << (grid.last + 1)) <= hi) ++grid.last;
  } else {
    grid.first = (lo + step - 1) / step;
    grid.last = hi / step;
  }
  return grid;
}

}  // namespace

uint32_t LargestBatchWhere(const MemoryModel& model, uint32_t step,
                           absl::FunctionRef<bool(uint32_t)> fits) {
  const BatchGrid grid = GridFor(model, step);
  if (grid.last < grid.first || !fits(grid.At(grid.first))) return 0;
  int64_t fitting = grid.first;
  int64_t failing = grid.last + 1;
  while (failing - fitting > 1) {
    const int64_t mid = fitting + (failing - fitting) / 2;
    (fits(grid.At(mid)) ? fitting : failing) = mid;
  }
  return grid.At(fitting);
}

uint32_t SmallestGridBatch(const MemoryModel& model, uint32_t step) {
  const BatchGrid grid = GridFor(model, step);
  return grid.last < grid.first ? 0 : grid.At(grid.first);
}

uint32_t LargestFittingBatch(const MemoryModel& model, int64_t usable, uint32_t step) {
  // The headroomed peak grows with the batch (its error term grows more
  // slowly than the batch), so the batches that fit are a prefix.
  return LargestBatchWhere(model, step,
                           [&](uint32_t batch) { return FitsMemory(model, batch, usable); });
}

v1::MemoryPrediction PredictMemory(const MemoryModel& model, uint32_t batch,
                                   const v1::DeviceSpec& device, uint32_t largest_fitting_batch) {
  v1::MemoryPrediction memory;
  const int64_t usable = UsableMemoryBytes(device);
  memory.set_peak_allocated_bytes(PredictPeakBytes(model, batch));
  memory.set_expected_error_percent(MemoryErrorPercent(model, batch));
  memory.set_usable_bytes(usable);
  memory.set_fits(FitsMemory(model, batch, usable));
  memory.set_largest_fitting_batch(largest_fitting_batch);
  return memory;
}

}  // namespace habitat
