#include "server/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

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
