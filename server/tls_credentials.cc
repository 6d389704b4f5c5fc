#include "server/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpcpp/security/server_credentials.h"

namespace habitat {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

// Read as is (not ReadFile: no gzip sniffing for key material).
absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": cannot read '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (bytes.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", path, "' is empty"));
  }
  return bytes.str();
}

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The certificates of a PEM bundle; an error if there are none.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(const char* flag, const std::string& path,
                                                       const std::string& pem) {
  std::vector<X509Ptr> certificates;
  BioPtr bio = MemoryBio(pem);
  while (X509* certificate = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certificates.emplace_back(certificate);
  }
  ERR_clear_error();  // the loop ends on an expected "no start line"
  if (certificates.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": '", path, "' holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
  }
  return certificates;
}

absl::Status CheckValidity(const char* flag, const std::string& path, X509* certificate) {
  if (X509_cmp_current_time(X509_get0_notAfter(certificate)) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": the certificate in '", path, "' has expired"));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(certificate)) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": the certificate in '", path, "' is not valid yet"));
  }
  return absl::OkStatus();
}

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

// Bits of security OpenSSL's security levels 1-5 require of keys
// (SSL_CTX_set_security_level(3)); level 0 requires nothing.
int MinimumSecurityBits(int level) {
  static constexpr int kBits[] = {0, 80, 112, 128, 192, 256};
  return kBits[std::clamp(level, 0, 5)];
}

std::string KeyType(const EVP_PKEY* key) {
  switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_RSA:
    case EVP_PKEY_RSA_PSS:
      return "RSA";
    case EVP_PKEY_DSA:
      return "DSA";
    case EVP_PKEY_EC:
      return "EC";
    case EVP_PKEY_ED25519:
      return "Ed25519";
    case EVP_PKEY_ED448:
      return "Ed448";
    default:
      return "private";
  }
}

std::string OpenSslReason() {
  const unsigned long code = ERR_peek_last_error();
  const char* reason = code == 0 ? nullptr : ERR_reason_error_string(code);
  ERR_clear_error();
  return reason == nullptr ? "no reason given" : reason;
}

// gRPC hands the PEM pair to the same OpenSSL library, which refuses keys
// and signatures below its security level (2 on Debian: RSA and DSA keys
// under 2048 bits, SHA-1 signatures). gRPC then fails to listen ("cannot
// listen on ..."), not naming the file: load them into a context made the
// way gRPC makes its own to say which file and why, before that.
absl::Status CheckUsableByTls(const TlsOptions& options, const std::vector<X509Ptr>& chain,
                              EVP_PKEY* key) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (ctx == nullptr) {
    return absl::InternalError(
        absl::StrCat("OpenSSL cannot make a TLS context: ", OpenSslReason()));
  }
  const int level = SSL_CTX_get_security_level(ctx.get());
  const int needed = MinimumSecurityBits(level);
  const int bits = EVP_PKEY_get_security_bits(key);
  if (bits < needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key: the ", KeyType(key), " key in '", options.key_file, "' has ",
        EVP_PKEY_get_bits(key), " bits (", bits,
        " bits of security), too weak for this system's OpenSSL: its security level ", level,
        " needs keys of at least ", needed,
        " bits of security, and TLS would refuse the key. Make a new key and certificate: "
        "RSA of 2048 bits or more (openssl req -newkey rsa:3072 ...) or EC P-256 "
        "(openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 ...)"));
  }
  if (SSL_CTX_use_certificate(ctx.get(), chain.front().get()) != 1) {
    const unsigned long code = ERR_peek_last_error();
    const std::string reason = OpenSslReason();
    if (ERR_GET_REASON(code) == SSL_R_CA_MD_TOO_WEAK) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls_cert: the certificate in '", options.cert_file,
          "' is signed with a digest too weak for this system's OpenSSL (security level ", level,
          ": ", reason, "); have it signed again with SHA-256"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert: this system's OpenSSL (security level ", level,
                     ") refuses the certificate in '", options.cert_file, "': ", reason));
  }
  for (size_t i = 1; i < chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx.get(), chain[i].get()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls_cert: this system's OpenSSL (security level ", level, ") refuses certificate ",
          i + 1, " of the chain in '", options.cert_file, "': ", OpenSslReason()));
    }
  }
  if (SSL_CTX_use_PrivateKey(ctx.get(), key) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_key: this system's OpenSSL refuses the key in '", options.key_file,
                     "': ", OpenSslReason()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options) {
  if (!options.enabled()) {
    if (!options.client_ca_file.empty()) {
      return absl::InvalidArgumentError("--tls_client_ca needs --tls_cert and --tls_key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.cert_file.empty() || options.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS needs both --tls_cert and --tls_key (only --",
                     options.cert_file.empty() ? "tls_key" : "tls_cert", " was given)"));
  }
  HABITAT_ASSIGN_OR_RETURN(std::string cert_pem, ReadPem("tls_cert", options.cert_file));
  HABITAT_ASSIGN_OR_RETURN(std::string key_pem, ReadPem("tls_key", options.key_file));
  HABITAT_ASSIGN_OR_RETURN(auto chain, ParseCertificates("tls_cert", options.cert_file, cert_pem));
  HABITAT_RETURN_IF_ERROR(CheckValidity("tls_cert", options.cert_file, chain.front().get()));
  BioPtr key_bio = MemoryBio(key_pem);
  KeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_key: '", options.key_file,
                     "' holds no unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)"));
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key: the key in '", options.key_file,
        "' does not match the first certificate in --tls_cert '", options.cert_file, "'"));
  }
  HABITAT_RETURN_IF_ERROR(CheckUsableByTls(options, chain, key.get()));

  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (!options.client_ca_file.empty()) {
    HABITAT_ASSIGN_OR_RETURN(std::string ca_pem, ReadPem("tls_client_ca", options.client_ca_file));
    HABITAT_RETURN_IF_ERROR(
        ParseCertificates("tls_client_ca", options.client_ca_file, ca_pem).status());
    ssl.pem_root_certs = std::move(ca_pem);
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  ssl.pem_key_cert_pairs.push_back({std::move(key_pem), std::move(cert_pem)});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace habitat
