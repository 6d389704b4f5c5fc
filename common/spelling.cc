#include "common/spelling.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace habitat {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> ClosestName(absl::string_view typed,
                                       const std::vector<std::string>& known) {
  const std::string* best = nullptr;
  size_t best_distance = std::max<size_t>(2, typed.size() / 3) + 1;
  for (const std::string& name : known) {
    const bool prefix = typed.size() >= 2 && absl::StartsWithIgnoreCase(name, typed);
    const size_t distance = prefix ? 1 : EditDistance(typed, name);
    if (distance < best_distance) {
      best = &name;
      best_distance = distance;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

std::string DidYouMean(absl::string_view typed, const std::vector<std::string>& known,
                       absl::string_view prefix) {
  const std::optional<std::string> closest = ClosestName(typed, known);
  return closest.has_value() ? absl::StrCat(" (did you mean '", prefix, *closest, "'?)") : "";
}

}  // namespace habitat
