#ifndef HABITAT_COMMON_PROGRAM_FLAGS_H_
#define HABITAT_COMMON_PROGRAM_FLAGS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace habitat {

// Sets up absl's flag usage for one of the project's programs: `--help`
// lists the flags defined in this project's sources (absl lists only those
// of a file named like the program, so every binary built from a main.cc
// printed "No flags matched"), and `--version` prints
// "<program> <project version>".
void SetProgramFlagsUsage(absl::string_view program, absl::string_view usage);

// absl::ParseCommandLine, taking flag names with dashes as well as with
// underscores (--token-file as --token_file), so the servers take flags as
// the habitat CLI writes them. Returns the positional arguments, argv[0]
// first; exits on an unknown flag, as absl does.
std::vector<char*> ParseProgramFlags(int argc, char** argv);

// `arg` with the dashes of its flag name made underscores where the result
// names a defined flag ("--token-file=a-b" -> "--token_file=a-b",
// "--no-tls" -> "--notls" for a bool `tls`); as is otherwise (a value such
// as "-x-y", a positional argument).
std::string UnderscoreFlagName(absl::string_view arg);

}  // namespace habitat

#endif  // HABITAT_COMMON_PROGRAM_FLAGS_H_
