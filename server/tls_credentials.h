// Server credentials for the gRPC port: plaintext, TLS, or TLS that
// requires client certificates. The PEM files are checked at start-up so a
// wrong path, a non-PEM file or a key that does not match the certificate
// fails there, naming the file, instead of at the first handshake.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace habitat {

struct TlsOptions {
  // PEM certificate chain (leaf first) and private key; both or neither.
  std::string cert_file;
  std::string key_file;
  // PEM CA certificates; when set, every client must present a certificate
  // signed by one of them.
  std::string client_ca_file;

  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

// Insecure credentials when `options` is all empty.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options);

}  // namespace habitat
