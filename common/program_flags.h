#ifndef HABITAT_COMMON_PROGRAM_FLAGS_H_
#define HABITAT_COMMON_PROGRAM_FLAGS_H_

#include "absl/strings/string_view.h"

namespace habitat {

// Sets up absl's flag usage for one of the project's programs: `--help`
// lists the flags defined in this project's sources (absl lists only those
// of a file named like the program, so every binary built from a main.cc
// printed "No flags matched"), and `--version` prints
// "<program> <project version>".
void SetProgramFlagsUsage(absl::string_view program, absl::string_view usage);

}  // namespace habitat

#endif  // HABITAT_COMMON_PROGRAM_FLAGS_H_
