#include "client/cli_args.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/spelling.h"

namespace habitat {
namespace {

// " (did you mean '--x'?)" for the closest known option; "" when none is
// close.
std::string Suggestion(const std::string& name, const std::vector<OptionSpec>& specs) {
  std::vector<std::string> names;
  for (const auto& spec : specs) names.push_back(spec.name);
  return DidYouMean(name, names, "--");
}

}  // namespace

absl::StatusOr<CliArgs> CliArgs::Parse(const std::vector<std::string>& args,
                                       const std::vector<OptionSpec>& specs) {
  CliArgs parsed;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    // -h is what people type for help everywhere.
    std::string word = !options_done && args[i] == "-h" ? std::string("--help") : args[i];
    if (!options_done && word.size() == 2 && word[0] == '-' && word[1] != '-') {
      for (const auto& spec : specs) {
        if (spec.short_name != 0 && spec.short_name == word[1]) word = "--" + spec.name;
      }
    }
    if (options_done || word.size() < 2 || word.compare(0, 2, "--") != 0) {
      if (!options_done && word.size() > 1 && word[0] == '-' && word != "-") {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown option '", word, "' (options are spelled --name)"));
      }
      parsed.positional_.push_back(word);
      continue;
    }
    if (word == "--") {
      options_done = true;
      continue;
    }
    std::string name = word.substr(2);
    std::optional<std::string> inline_value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const OptionSpec* spec = nullptr;
    for (const auto& candidate : specs) {
      if (candidate.name == name) spec = &candidate;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option '--", name, "'", Suggestion(name, specs)));
    }
    if (parsed.values_.count(name) > 0 || parsed.switches_.count(name) > 0) {
      return absl::InvalidArgumentError(absl::StrCat("option '--", name, "' given twice"));
    }
    if (!spec->takes_value) {
      if (inline_value.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("option '--", name, "' takes no value"));
      }
      parsed.switches_.insert(name);
      continue;
    }
    if (inline_value.has_value()) {
      parsed.values_[name] = *inline_value;
    } else if (i + 1 < args.size()) {
      parsed.values_[name] = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("option '--", name, "' needs a value"));
    }
  }
  return parsed;
}

bool CliArgs::Has(const std::string& name) const {
  return values_.count(name) > 0 || switches_.count(name) > 0;
}

std::string CliArgs::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<std::optional<int64_t>> CliArgs::GetInt(const std::string& name, int64_t min,
                                                       int64_t max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::optional<int64_t>();
  int64_t value = 0;
  if (!absl::SimpleAtoi(it->second, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be an integer in [", min,
                                                   ", ", max, "], got '", it->second, "'"));
  }
  return std::optional<int64_t>(value);
}

absl::StatusOr<std::vector<std::string>> CliArgs::GetList(const std::string& name) const {
  std::vector<std::string> items;
  auto it = values_.find(name);
  if (it == values_.end()) return items;
  for (absl::string_view item : absl::StrSplit(it->second, ',')) {
    if (item.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " has an empty item in '", it->second, "' (expected A,B,C)"));
    }
    items.emplace_back(item);
  }
  return items;
}

}  // namespace habitat
