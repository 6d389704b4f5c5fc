// Telling JSON text from a binary protobuf. Editors on Windows save UTF-8
// with a byte order mark, which RFC 8259 (section 8.1) lets a parser ignore;
// a serialised habitat.v1.Trace never starts with one (0xEF would be a field
// tag of wire type 7, which does not exist).
#pragma once

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

namespace habitat {

inline constexpr absl::string_view kUtf8Bom = "\xEF\xBB\xBF";

// `text` without a leading UTF-8 byte order mark.
inline absl::string_view StripUtf8Bom(absl::string_view text) {
  if (text.substr(0, kUtf8Bom.size()) == kUtf8Bom) text.remove_prefix(kUtf8Bom.size());
  return text;
}

// Whether `bytes` start like a JSON document: after an optional byte order
// mark and whitespace, '{' or '['.
inline bool StartsLikeJson(absl::string_view bytes) {
  const absl::string_view text = absl::StripLeadingAsciiWhitespace(StripUtf8Bom(bytes));
  return !text.empty() && (text.front() == '{' || text.front() == '[');
}

}  // namespace habitat
