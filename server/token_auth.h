// Bearer-token authentication with per-tenant tokens. The token file holds
// one `tenant token` pair per line ('#' starts a comment); a tenant may have
// several tokens (rotation: add the new one, reload, retire the old one).
// Tokens are kept only as SHA-256 digests and never appear in messages.
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
