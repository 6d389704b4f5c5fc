// Times are integer nanoseconds everywhere inside; these are the only
// conversions, so rounding is the same everywhere.
#pragma once

#include <cmath>
#include <cstdint>

namespace habitat {

using Nanoseconds = int64_t;

inline double NsToMs(Nanoseconds ns) { return static_cast<double>(ns) / 1e6; }
inline double NsToSeconds(Nanoseconds ns) { return static_cast<double>(ns) / 1e9; }
// Microseconds (Chrome trace format) to nanoseconds, rounded to nearest.
inline Nanoseconds UsToNs(double us) { return static_cast<Nanoseconds>(std::llround(us * 1e3)); }
inline Nanoseconds MsToNs(double ms) { return static_cast<Nanoseconds>(std::llround(ms * 1e6)); }

}  // namespace habitat
