// Plain-text layout for the CLI's output: columns sized to their contents,
// word wrapping, and the width the tables keep within.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace habitat {

// The prediction tables fit in this many terminal columns (a long instance
// name gives way).
inline constexpr size_t kTableWidth = 100;

// Terminal columns of UTF-8 text: its code points ("±" is two bytes, one
// column).
size_t DisplayWidth(absl::string_view text);

// `text` cut to `width` bytes, ending in "..." where it was cut.
std::string Truncate(const std::string& text, size_t width);

// Word-wraps `text` to `width` columns; the first line starts with `first`,
// the others are indented as deep (by `indent` spaces where given). Ends
// with a newline.
std::string Wrap(const std::string& first, const std::string& text, size_t width,
                 std::optional<size_t> indent = std::nullopt);

// A column of a text table: its header, one cell per row, and its
// alignment (right unless `left`).
struct TextColumn {
  std::string header;
  bool left = false;
  std::vector<std::string> cells;
};

// The width of RenderColumns' widest line for `columns`, `indent` included.
size_t TableWidth(const std::vector<TextColumn>& columns, const std::string& indent);

// A header line, then one line per row, each starting with `indent`: each
// column as wide as its widest cell or header, two spaces before a
// left-aligned column but the second and one before the others, trailing
// spaces trimmed. A row with a tail (`(*tails)[row]` not empty) has, after
// its first `tail_after` columns, "-  " and the tail instead of the other
// columns, wrapped within kTableWidth.
std::string RenderColumns(const std::vector<TextColumn>& columns, const std::string& indent,
                          const std::vector<std::string>* tails = nullptr, size_t tail_after = 0);

}  // namespace habitat
