// Where a tensor holds the batch (batch_scaling.h explains the places).
// Header-only standard C++17: the agent's PyTorch extension compiles it too,
// so the agent re-runs an operation at another batch with the same inputs
// scaled that the engine scales.
#pragma once

#include <cstddef>
#include <cstdint>

namespace habitat {

// The dimension of `shape` (a container of int64 sizes) that holds the
// batch, or -1; `is_parameter(shape)` says whether the shape is a
// parameter's, which never carries it.
template <typename Shape, typename IsParameter>
int BatchDimension(const Shape& shape, int64_t batch, const IsParameter& is_parameter) {
  if (batch <= 0 || shape.empty() || is_parameter(shape)) return -1;
  const int rank = static_cast<int>(shape.size());
  if (shape[0] >= batch && shape[0] % batch == 0) return 0;
  for (int d = 1; d <= 2 && d < rank; ++d) {
    if (shape[d] == batch) return d;
  }
  if (rank >= 3 && shape[1] >= batch && shape[1] % batch == 0) return 1;
  return -1;
}

}  // namespace habitat
