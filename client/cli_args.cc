#include "client/cli_args.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace habitat {
namespace {

// Edit distance (insertions, deletions, substitutions) between two option
// names; they are short, so the quadratic table is fine.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean '--x'?)" for the closest known option within a few edits,
// or a known option that starts with `name`; "" when none is close.
std::string Suggestion(const std::string& name, const std::vector<OptionSpec>& specs) {
  const OptionSpec* best = nullptr;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const auto& spec : specs) {
    const size_t distance =
        spec.name.rfind(name, 0) == 0 && !name.empty() ? 1 : EditDistance(name, spec.name);
    if (distance < best_distance) {
      best = &spec;
      best_distance = distance;
    }
  }
  return best == nullptr ? "" : absl::StrCat(" (did you mean '--", best->name, "'?)");
}

}  // namespace

absl::StatusOr<CliArgs> CliArgs::Parse(const std::vector<std::string>& args,
                                       const std::vector<OptionSpec>& specs) {
  CliArgs parsed;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    // -h is what people type for help everywhere.
    const std::string word = !options_done && args[i] == "-h" ? std::string("--help") : args[i];
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
