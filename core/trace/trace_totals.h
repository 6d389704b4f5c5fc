// Totals of a trace that several tools compare predictions against.
#pragma once

#include <cstdint>

#include "habitat/v1/trace.pb.h"

namespace habitat {

// Σ of every operation's forward and backward pass time plus the
// unattributed kernels: the origin's GPU time counted per operation (it
// exceeds iteration_gpu_busy_ns where streams overlap).
int64_t SumOfPassTimes(const habitat::v1::Trace& trace);

}  // namespace habitat
