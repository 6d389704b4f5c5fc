// Times are integer nanoseconds everywhere inside; these are the only
// conversions, so rounding is the same everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace habitat {

using Nanoseconds = int64_t;

inline double NsToMs(Nanoseconds ns) { return static_cast<double>(ns) / 1e6; }
inline double NsToSeconds(Nanoseconds ns) { return static_cast<double>(ns) / 1e9; }
// Microseconds (Chrome trace format) to nanoseconds, rounded to nearest.
inline Nanoseconds UsToNs(double us) { return static_cast<Nanoseconds>(std::llround(us * 1e3)); }
inline Nanoseconds MsToNs(double ms) { return static_cast<Nanoseconds>(std::llround(ms * 1e6)); }

// Predicted times saturate instead of overflowing: a valid but extreme
// trace (a long pass whose recorded kernels sum to a few ns) scales by a
// huge ratio, and llround beyond int64 gives an unspecified, negative value.
// Negative times round to 0; NaN and anything past the int64 range to its
// maximum.
inline Nanoseconds SaturatingRound(double ns) {
  constexpr double kMax = static_cast<double>(std::numeric_limits<Nanoseconds>::max());
  if (!(ns < kMax)) return std::numeric_limits<Nanoseconds>::max();  // also NaN
  return ns > 0 ? static_cast<Nanoseconds>(std::llround(ns)) : 0;
}

// a + b, or the int64 maximum where that would overflow.
inline Nanoseconds SaturatingAdd(Nanoseconds a, Nanoseconds b) {
  Nanoseconds sum;
  if (__builtin_add_overflow(a, b, &sum)) return std::numeric_limits<Nanoseconds>::max();
  return sum;
}

}  // namespace habitat
