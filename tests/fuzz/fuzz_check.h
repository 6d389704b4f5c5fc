// Helpers shared by the fuzz targets.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "google/protobuf/stubs/logging.h"

// A check that stays on in every build type of the fuzz targets (assert is
// compiled out under NDEBUG), so a broken property is reported as a crash.
#define HABITAT_FUZZ_CHECK(condition)                                                         \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (false)

namespace habitat {
namespace fuzz {

// Protobuf logs an ERROR line for every string field with invalid UTF-8 it
// refuses to parse; mutated inputs hit that constantly, and the logging
// would dominate the run time. Parse failures are still reported by the
// return value.
inline void SilenceProtobufLogs() {
  static const bool silenced = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)silenced;
}

}  // namespace fuzz
}  // namespace habitat
