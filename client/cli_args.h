// Command-line parsing for the `habitat` subcommands. Hand-rolled rather
// than absl flags because flags are global and we need per-subcommand option
// sets, exit code 2 on misuse, and messages that name the subcommand.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace habitat {

struct OptionSpec {
  std::string name;     // without the leading "--"
  bool takes_value;     // --name VALUE / --name=VALUE, else a boolean switch
  char short_name = 0;  // a switch's one-letter form (-q for --quiet); 0: none
};

class CliArgs {
 public:
  // Parses `args` (the words after the subcommand). Accepts "--name value",
  // "--name=value", a switch's "-x" (OptionSpec::short_name; -h is --help)
  // and, after a lone "--", only positional words.
  // INVALID_ARGUMENT for an unknown option, a missing value, a value given
  // to a switch, or an option repeated.
  static absl::StatusOr<CliArgs> Parse(const std::vector<std::string>& args,
                                       const std::vector<OptionSpec>& specs);

  const std::vector<std::string>& positional() const { return positional_; }
  bool Has(const std::string& name) const;
  // The value, or `fallback` when the option was not given.
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // INVALID_ARGUMENT naming the option when the value is not an integer in
  // [min, max]; nullopt when absent.
  absl::StatusOr<std::optional<int64_t>> GetInt(const std::string& name, int64_t min,
                                                int64_t max) const;
  // Splits a comma-separated value; empty items are an error.
  absl::StatusOr<std::vector<std::string>> GetList(const std::string& name) const;

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::string> values_;
  std::set<std::string> switches_;
};

}  // namespace habitat
