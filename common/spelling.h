// Suggestions for a mistyped name: an option, a command, a GPU id or a
// catalog, all short, so the quadratic edit distance is fine.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace habitat {

// Insertions, deletions and substitutions between `a` and `b`, ignoring
// ASCII case (people type "h100-smx" for "H100-SXM").
size_t EditDistance(absl::string_view a, absl::string_view b);

// The closest of `known` to `typed`: one it starts (a prefix of at least
// two characters), else one within a third of its length in edits (at
// least 2); nullopt when none is that close.
std::optional<std::string> ClosestName(absl::string_view typed,
                                       const std::vector<std::string>& known);

// " (did you mean 'X'?)" for ClosestName's X, with `prefix` before it
// (e.g. "--"); "" when none is close.
std::string DidYouMean(absl::string_view typed, const std::vector<std::string>& known,
                       absl::string_view prefix = "");

}  // namespace habitat
