// An estimate of the DRAM bytes one pass of an operation moves, from its
// recorded tensor arguments, for traces without hardware counters (Kineto
// imports, captures without counter permission). ScaleKernel uses DRAM bytes
// to tell how much of a kernel's time is bound by memory bandwidth (gamma from
// the achieved bandwidth); without them every kernel-alike kernel counts as
// fully memory-bound, which is wrong for batch norm, pooling and other
// kernels that move their bytes far below the streaming rate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "habitat/v1/trace.pb.h"

namespace habitat {

// Forward: every tensor argument read once plus an output as large as the
// largest input (elementwise, normalisation, activation and copy ops write a
// tensor of their input's shape). Backward: 1.5x the forward (it reads the
// output gradient and what forward saved and writes the input gradients).
// nullopt when the operation has no tensor argument with a known element
// size (e.g. the optimizer's tensor lists, recorded as `none`).
//
// Errors are one-sided on purpose: an overestimate makes the kernel look
// memory-bound, i.e. it falls back to scaling by bandwidth as without the
// estimate; ops that read a small part of a large input (embedding, index,
// slice) are overestimated that way.
std::optional<uint64_t> EstimatePassDramBytes(const habitat::v1::Operation& op, bool backward);

// Bytes per element of a PyTorch dtype spelling ("float", "c10::BFloat16",
// "long int" ...); 0 if unknown.
int DtypeBytes(const std::string& dtype);

// Bytes of a tensor argument (0 for an unknown dtype or a negative
// dimension), as a double so hostile shapes cannot overflow.
double TensorBytes(const habitat::v1::TensorArgument& tensor);

}  // namespace habitat
