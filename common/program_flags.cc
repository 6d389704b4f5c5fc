#include "common/program_flags.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

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

std::string UnderscoreFlagName(absl::string_view arg) {
  absl::string_view rest = arg;
  if (!absl::ConsumePrefix(&rest, "-")) return std::string(arg);
  absl::ConsumePrefix(&rest, "-");
  const size_t name_end = std::min(rest.find('='), rest.size());
  const absl::string_view name = rest.substr(0, name_end);
  if (!absl::StrContains(name, '-')) return std::string(arg);
  const absl::string_view dashes = arg.substr(0, arg.size() - rest.size());
  const absl::string_view value = rest.substr(name_end);
  const std::string underscored = absl::StrReplaceAll(name, {{"-", "_"}});
  if (absl::FindCommandLineFlag(underscored) != nullptr) {
    return absl::StrCat(dashes, underscored, value);
  }
  // absl negates a bool `tls` as --notls.
  absl::string_view negated = underscored;
  if (absl::ConsumePrefix(&negated, "no_") && absl::FindCommandLineFlag(negated) != nullptr) {
    return absl::StrCat(dashes, "no", negated, value);
  }
  return std::string(arg);
}

std::vector<char*> ParseProgramFlags(int argc, char** argv) {
  // Kept for the program's life: absl's positional arguments point into it.
  static auto* const storage = new std::vector<std::string>();
  static auto* const pointers = new std::vector<char*>();
  storage->reserve(static_cast<size_t>(argc));
  bool flags_ended = false;
  for (int i = 0; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    storage->push_back(i == 0 || flags_ended ? std::string(arg) : UnderscoreFlagName(arg));
    flags_ended = flags_ended || (i > 0 && arg == "--");
  }
  for (std::string& arg : *storage) pointers->push_back(arg.data());
  pointers->push_back(nullptr);
  return absl::ParseCommandLine(argc, pointers->data());
}

}  // namespace habitat
