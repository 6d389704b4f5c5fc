#include "client/cli_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace habitat {
namespace {

size_t ColumnWidth(const TextColumn& column) {
  size_t width = DisplayWidth(column.header);
  for (const std::string& cell : column.cells) width = std::max(width, DisplayWidth(cell));
  return width;
}

size_t SeparatorWidth(const std::vector<TextColumn>& columns, size_t i) {
  return i == 0 ? 0 : columns[i].left && i > 1 ? 2 : 1;
}

}  // namespace

size_t DisplayWidth(absl::string_view text) {
  size_t width = 0;
  for (char c : text) width += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return width;
}

std::string Truncate(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  return text.substr(0, width - 3) + "...";
}

std::string Wrap(const std::string& first, const std::string& text, size_t width,
                 std::optional<size_t> indent_width) {
  const std::string indent(indent_width.value_or(first.size()), ' ');
  std::string out = first;
  size_t column = first.size();
  bool line_empty = true;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line_empty && column + 1 + word.size() > width) {
      absl::StrAppend(&out, "\n", indent);
      column = indent.size();
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++column;
    }
    absl::StrAppend(&out, word);
    column += word.size();
    line_empty = false;
  }
  return out + "\n";
}

size_t TableWidth(const std::vector<TextColumn>& columns, const std::string& indent) {
  size_t width = indent.size();
  for (size_t i = 0; i < columns.size(); ++i) {
    width += SeparatorWidth(columns, i) + ColumnWidth(columns[i]);
  }
  return width;
}

std::string RenderColumns(const std::vector<TextColumn>& columns, const std::string& indent,
                          const std::vector<std::string>* tails, size_t tail_after) {
  std::vector<size_t> widths;
  size_t rows = 0;
  for (const TextColumn& column : columns) {
    widths.push_back(ColumnWidth(column));
    rows = std::max(rows, column.cells.size());
  }
  std::string out;
  for (size_t line_index = 0; line_index <= rows; ++line_index) {
    const bool header = line_index == 0;
    const size_t row = line_index - 1;
    const bool tail = !header && tails != nullptr && !(*tails)[row].empty();
    std::string line = indent;
    for (size_t i = 0; i < columns.size(); ++i) {
      line.append(SeparatorWidth(columns, i), ' ');
      if (tail && i == tail_after) break;
      const std::string& text = header ? columns[i].header : columns[i].cells[row];
      const std::string fill(widths[i] - DisplayWidth(text), ' ');
      line += columns[i].left ? text + fill : fill + text;
    }
    if (tail) {
      out += Wrap(line + "-  ", (*tails)[row], kTableWidth);
    } else {
      line.erase(line.find_last_not_of(' ') + 1);
      out += line + "\n";
    }
  }
  return out;
}

}  // namespace habitat
