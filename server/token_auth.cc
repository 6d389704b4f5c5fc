#include "server/token_auth.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "core/backend/prediction_backend.h"

namespace habitat {
namespace {

// Tokens are kept and looked up by digest, so the table never holds them.
std::string Digest(absl::string_view token) { return Sha256Hex(token); }

// Tokens travel in an HTTP/2 header: visible ASCII only.
bool IsTokenCharacter(char c) { return c > 0x20 && c < 0x7f; }

enum class CharClass { kLower, kUpper, kDigit, kOther };

CharClass ClassOf(char c) {
  if (c >= 'a' && c <= 'z') return CharClass::kLower;
  if (c >= 'A' && c <= 'Z') return CharClass::kUpper;
  if (c >= '0' && c <= '9') return CharClass::kDigit;
  return CharClass::kOther;
}

struct Shape {
  bool lower = false, upper = false, digit = false;
  bool all_hex = true;
  size_t alphanumerics = 0;
  // Maximal runs of letters and digits of one class; other characters end
  // a run; a capital followed by lower-case letters is one run ("Vision").
  size_t runs = 0;
  size_t distinct = 0;

  int classes() const { return int{lower} + int{upper} + int{digit}; }
};

Shape ShapeOf(absl::string_view s) {
  Shape shape;
  bool seen[256] = {};
  CharClass previous = CharClass::kOther;
  for (const char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (!seen[u]) {
      seen[u] = true;
      ++shape.distinct;
    }
    if (!absl::ascii_isxdigit(u)) shape.all_hex = false;
    const CharClass current = ClassOf(c);
    switch (current) {
      case CharClass::kLower:
        shape.lower = true;
        break;
      case CharClass::kUpper:
        shape.upper = true;
        break;
      case CharClass::kDigit:
        shape.digit = true;
        break;
      case CharClass::kOther:
        break;
    }
    if (current != CharClass::kOther) {
      ++shape.alphanumerics;
      const bool continues =
          current == previous || (previous == CharClass::kUpper && current == CharClass::kLower);
      if (!continues) ++shape.runs;
    }
    previous = current;
  }
  return shape;
}

}  // namespace

std::string TokenLikeTenantReason(absl::string_view field) {
  if (field.size() < kTokenLikeTenantLength) return "";
  const Shape shape = ShapeOf(field);
  if (shape.all_hex) {
    return absl::StrCat(kTokenLikeTenantLength, " or more characters, all hex digits");
  }
  // Random base64 changes class about every 2 characters; names change it
  // at word boundaries ("AcmeCorpVision2Prod1": 6 runs in 20 characters).
  if (shape.classes() == 3 && shape.alphanumerics < 3 * shape.runs) {
    return absl::StrCat(kTokenLikeTenantLength,
                        " or more characters mixing upper-case letters, lower-case letters and "
                        "digits in runs of under 3 on average, as random strings do");
  }
  return "";
}

std::string WeakTokenReason(absl::string_view token) {
  for (const char c : token) {
    if (!IsTokenCharacter(c)) return "holds a character outside visible ASCII";
  }
  if (token.size() < kMinTokenLength || token.size() > kMaxTokenLength) {
    return absl::StrCat("has ", token.size(), " characters; tokens must have ", kMinTokenLength,
                        " to ", kMaxTokenLength);
  }
  const Shape shape = ShapeOf(token);
  if (shape.classes() < 2) {
    return absl::StrCat("has ", shape.classes() == 0 ? "none" : "only one",
                        " of lower-case letters, upper-case letters and digits; a token needs "
                        "two of them, as generated ones have (`openssl rand -hex 32`): a name "
                        "or a placeholder is not a secret");
  }
  if (shape.distinct < kMinTokenDistinctCharacters) {
    return absl::StrCat("has ", shape.distinct, " different characters; at least ",
                        kMinTokenDistinctCharacters, " are needed");
  }
  return "";
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, absl::string_view source) {
  TokenTable table;
  // Token digest -> line, to report both lines of a duplicate.
  absl::flat_hash_map<std::string, int> line_of;
  // Tenant digest -> first line naming it, to find a token that is a name.
  absl::flat_hash_map<std::string, int> tenant_line_of;
  int line_number = 0;
  // Messages name the line and the rule, never a field: with the fields
  // swapped, the "tenant" is the secret.
  const auto error = [&](int line, absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file '", source, "' line ", line, ": ", what));
  };
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    std::vector<absl::string_view> fields;
    for (absl::string_view field :
         absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty())) {
      if (absl::StartsWith(field, "#")) break;  // comment to the end of the line
      fields.push_back(field);
    }
    if (fields.empty()) continue;
    if (fields.size() != 2) {
      return error(line_number,
                   absl::StrCat("expected `tenant token`, found ", fields.size(), " fields"));
    }
    const std::string tenant(fields[0]);
    const absl::string_view token = fields[1];
    if (const std::string why = TokenLikeTenantReason(tenant); !why.empty()) {
      return error(line_number,
                   absl::StrCat("the tenant (first field) looks like a token, not a name (", why,
                                "); are the two fields swapped? Each line is `tenant token`"));
    }
    if (!IsValidTenantName(tenant)) {
      return error(line_number,
                   "the tenant (first field) must be 1-64 characters of [A-Za-z0-9._-], "
                   "not starting with '.'");
    }
    if (const std::string why = WeakTokenReason(token); !why.empty()) {
      return error(line_number, absl::StrCat("the token (second field) ", why));
    }
    std::string digest = Digest(token);
    auto [it, inserted] = line_of.try_emplace(digest, line_number);
    if (!inserted) {
      return error(line_number,
                   absl::StrCat("the token (second field) duplicates the token on line ",
                                it->second, "; every token must be unique"));
    }
    tenant_line_of.try_emplace(Digest(tenant), line_number);
    table.tenant_by_digest_.emplace(std::move(digest), tenant);
  }
  if (table.tenant_by_digest_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file '", source, "' holds no tokens; add lines of the form `tenant token`"));
  }
  // A token spelled like a tenant of the file: a swapped line, or a name
  // used as a secret. The first such token line is reported.
  int token_line = 0, tenant_line = 0;
  for (const auto& [digest, line] : tenant_line_of) {
    auto token = line_of.find(digest);
    if (token != line_of.end() && (token_line == 0 || token->second < token_line)) {
      token_line = token->second;
      tenant_line = line;
    }
  }
  if (token_line != 0) {
    return error(token_line,
                 absl::StrCat("the token (second field) is the tenant name of line ", tenant_line,
                              "; are the two fields swapped? A token must be a generated secret"));
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::LoadFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat("cannot read token file '", path,
                                                           "': ", text.status().message()));
  }
  return Parse(*text, path);
}

const std::string* TokenTable::Find(absl::string_view token) const {
  // Looking up the digest, not the token, keeps lookup timing independent
  // of how much of a guessed token is right.
  auto it = tenant_by_digest_.find(Digest(token));
  return it == tenant_by_digest_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::FromTokenFile(std::string path) {
  if (path.empty()) return absl::InvalidArgumentError("the token file path is empty");
  auto authenticator = std::make_unique<Authenticator>();
  authenticator->path_ = std::move(path);
  HABITAT_RETURN_IF_ERROR(authenticator->Reload().status());
  return authenticator;
}

size_t Authenticator::token_count() const {
  absl::MutexLock lock(&mutex_);
  return table_ == nullptr ? 0 : table_->size();
}

absl::StatusOr<size_t> Authenticator::Reload() {
  if (path_.empty()) return absl::FailedPreconditionError("authentication is off");
  HABITAT_ASSIGN_OR_RETURN(TokenTable table, TokenTable::LoadFile(path_));
  const size_t count = table.size();
  auto loaded = std::make_shared<const TokenTable>(std::move(table));
  absl::MutexLock lock(&mutex_);
  table_ = std::move(loaded);
  return count;
}

absl::StatusOr<std::string> Authenticator::Authenticate(const ClientMetadata& metadata) const {
  if (path_.empty()) return std::string();
  const auto [begin, end] = metadata.equal_range("authorization");
  if (begin == end) {
    return absl::UnauthenticatedError(
        "missing `authorization: Bearer <token>` metadata; this server requires a token");
  }
  if (std::next(begin) != end) {
    return absl::UnauthenticatedError(
        "more than one `authorization` metadata entry; send exactly one");
  }
  absl::string_view value(begin->second.data(), begin->second.size());
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return absl::UnauthenticatedError(
        "the `authorization` metadata is not of the form `Bearer <token>`");
  }
  const absl::string_view token = absl::StripAsciiWhitespace(value.substr(kScheme.size()));
  std::shared_ptr<const TokenTable> table;
  {
    absl::MutexLock lock(&mutex_);
    table = table_;
  }
  const std::string* tenant = table == nullptr ? nullptr : table->Find(token);
  if (tenant == nullptr) {
    return absl::UnauthenticatedError("the bearer token is not valid on this server");
  }
  return *tenant;
}

}  // namespace habitat
