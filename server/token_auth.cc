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

constexpr size_t kMaxTokenLength = 1024;

// Tokens are kept and looked up by digest, so the table never holds them.
std::string Digest(absl::string_view token) { return Sha256Hex(token); }

// Tokens travel in an HTTP/2 header: visible ASCII only.
bool IsTokenCharacter(char c) { return c > 0x20 && c < 0x7f; }

}  // namespace

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, absl::string_view source) {
  TokenTable table;
  // Digest -> line, to report both lines of a duplicate.
  absl::flat_hash_map<std::string, int> line_of;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const auto error = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file '", source, "' line ", line_number, ": ", what));
    };
    std::vector<absl::string_view> fields;
    for (absl::string_view field :
         absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty())) {
      if (absl::StartsWith(field, "#")) break;  // comment to the end of the line
      fields.push_back(field);
    }
    if (fields.empty()) continue;
    if (fields.size() != 2) {
      return error(absl::StrCat("expected `tenant token`, found ", fields.size(), " fields"));
    }
    const std::string tenant(fields[0]);
    const absl::string_view token = fields[1];
    if (!IsValidTenantName(tenant)) {
      // Not echoed: a line with the fields swapped would print the token.
      return error(
          "the tenant name must be 1-64 characters of [A-Za-z0-9._-], "
          "not starting with '.'");
    }
    if (token.size() < kMinTokenLength || token.size() > kMaxTokenLength) {
      return error(absl::StrCat("the token of tenant '", tenant, "' is ", token.size(),
                                " characters; tokens must have ", kMinTokenLength, " to ",
                                kMaxTokenLength));
    }
    for (const char c : token) {
      if (!IsTokenCharacter(c)) {
        return error(absl::StrCat("the token of tenant '", tenant,
                                  "' holds a character outside visible ASCII"));
      }
    }
    std::string digest = Digest(token);
    auto [it, inserted] = line_of.try_emplace(digest, line_number);
    if (!inserted) {
      return error(absl::StrCat("the token of tenant '", tenant, "' duplicates the token on line ",
                                it->second, "; every token must be unique"));
    }
    table.tenant_by_digest_.emplace(std::move(digest), tenant);
  }
  if (table.tenant_by_digest_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file '", source, "' holds no tokens; add lines of the form `tenant token`"));
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
