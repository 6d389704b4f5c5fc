// Medians, said once: the tools' reports and the predictor all take them.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace habitat {

// The median of `values`: the mean of the two middle ones for an even
// count; NaN when there are none.
inline double Median(std::vector<double> values) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const size_t m = values.size() / 2;
  return values.size() % 2 == 1 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

// The upper of the two middle values for an even count: always one of the
// samples, so integers (nanoseconds) stay exact. `values` must not be empty.
template <typename T>
T UpperMedian(std::vector<T> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace habitat
