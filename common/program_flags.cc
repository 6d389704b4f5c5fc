#include "common/program_flags.h"

#include <string>

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#ifndef HABITAT_VERSION
#error "HABITAT_VERSION must be defined by the build (CMake's PROJECT_VERSION)"
#endif

namespace habitat {
namespace {

// Flags of absl itself (--flagfile, --fromenv, ...) stay out of --help;
// --helpfull lists them.
bool IsProjectFlagFile(absl::string_view path) { return !absl::StrContains(path, "absl/"); }

}  // namespace

void SetProgramFlagsUsage(absl::string_view program, absl::string_view usage) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = IsProjectFlagFile;
  config.contains_helpshort_flags = IsProjectFlagFile;
  const std::string version = absl::StrCat(program, " ", HABITAT_VERSION, "\n");
  config.version_string = [version] { return version; };
  absl::SetFlagsUsageConfig(config);
}

}  // namespace habitat
