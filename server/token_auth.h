// Bearer-token authentication with per-tenant tokens. The token file holds
// one `tenant token` pair per line ('#' starts a comment); a tenant may have
// several tokens (rotation: add the new one, reload, retire the old one).
// Tokens are kept only as SHA-256 digests; messages about the file name the
// line and the rule it fails, never a field of it (a line with its fields
// swapped holds the secret where the tenant should be).
//
// Every line must pass these rules (docs/operations.md, "A token file"):
//  - the tenant (first field) does not look like a token: not 16 or more
//    characters that are all hex digits (`openssl rand -hex`), nor 16 or
//    more that mix upper-case letters, lower-case letters and digits in
//    runs averaging under 3 characters (base64, base64url); a capitalised
//    word counts as one run. Then [A-Za-z0-9._-]{1,64}, not starting with
//    '.' (the tenant is a directory name of the trace store);
//  - the token (second field) looks generated: 16-1024 visible ASCII
//    characters, at least two of lower-case letters, upper-case letters and
//    digits, at least 6 different characters, not any tenant's name in the
//    file, and unique in the file.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/string_ref.h"

namespace habitat {

// Shortest token accepted: 16 characters from a random generator are
// already beyond guessing; shorter ones are likely placeholders.
inline constexpr size_t kMinTokenLength = 16;
inline constexpr size_t kMaxTokenLength = 1024;
// Fewest different characters in a token: a random 16-character hex token
// has fewer with probability 2.5e-5; "abab1212abab1212" has 4.
inline constexpr size_t kMinTokenDistinctCharacters = 6;
// A tenant field of this many characters or more is checked for looking
// like a token (16 hex digits are 64 random bits).
inline constexpr size_t kTokenLikeTenantLength = 16;

// Why `field`, read as a tenant, looks like a token rather than a name;
// empty when it does not. Never quotes `field`.
std::string TokenLikeTenantReason(absl::string_view field);
// Which rule `token` fails as a token, or empty when it passes all. Never
// quotes `token`.
std::string WeakTokenReason(absl::string_view token);

class TokenTable {
 public:
  // `source` names the file in error messages, which cite line numbers
  // and never the tokens.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text, absl::string_view source);
  static absl::StatusOr<TokenTable> LoadFile(const std::string& path);

  // The tenant owning `token`, or nullptr.
  const std::string* Find(absl::string_view token) const;
  size_t size() const { return tenant_by_digest_.size(); }

 private:
  absl::flat_hash_map<std::string, std::string> tenant_by_digest_;
};

// The call metadata type of grpc::ServerContextBase::client_metadata().
using ClientMetadata = std::multimap<grpc::string_ref, grpc::string_ref>;

class Authenticator {
 public:
  // Authentication off: every call is the anonymous tenant "".
  Authenticator() = default;
  static absl::StatusOr<std::unique_ptr<Authenticator>> FromTokenFile(std::string path);

  bool enabled() const { return !path_.empty(); }
  const std::string& token_file() const { return path_; }
  size_t token_count() const;

  // The tenant of a call carrying `authorization: Bearer <token>`;
  // UNAUTHENTICATED saying what is wrong otherwise.
  absl::StatusOr<std::string> Authenticate(const ClientMetadata& metadata) const;

  // Re-reads the token file (on SIGHUP). On error the old tokens stay in
  // force and the error says why. Returns the number of tokens loaded.
  absl::StatusOr<size_t> Reload();

 private:
  std::string path_;
  mutable absl::Mutex mutex_;
  // Swapped whole on reload; a call holds its own reference while checking.
  std::shared_ptr<const TokenTable> table_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace habitat
