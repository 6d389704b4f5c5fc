// PredictionClient's and the CLI's token and TLS options against a real
// server with bearer-token authentication, TLS and mutual TLS (the server's
// side is covered in security_test.cc). Certificates are made per run by
// make_test_certs.sh (openssl CLI); tokens are random per run.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli_commands.h"
#include "client/prediction_client.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/prediction_server.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;

std::string RandomToken() {
  std::random_device device;
  std::string token;
  const char* alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (int i = 0; i < 32; ++i) token += alphabet[device() % 36];
  return token;
}

class ClientSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string((std::filesystem::path(::testing::TempDir()) /
                            absl::StrCat("habitat_security_", ::getpid()))
                               .string());
    const std::string command = absl::StrCat("bash '", HABITAT_CERT_SCRIPT, "' '", *dir_, "'");
    ASSERT_EQ(std::system(command.c_str()), 0)
        << command << " failed (is the openssl command-line tool installed?)";
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  std::string File(const std::string& name) const { return *dir_ + "/" + name; }

  // Starts a server; `configure` sets TLS and token options.
  template <typename Configure>
  void Start(Configure&& configure) {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.backend.data_dir = HABITAT_DATA_DIR;
    configure(options);
    auto server = PredictionServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
  }

  absl::StatusOr<v1::ListDevicesResponse> ListDevices(ClientOptions options) {
    options.max_attempts = 2;
    options.initial_backoff = absl::Milliseconds(10);
    options.deadline = absl::Seconds(10);
    auto client = PredictionClient::Connect(address_, options);
    if (!client.ok()) return client.status();
    return (*client)->ListDevices();
  }

  void TearDown() override {
    if (server_ != nullptr) {
      server_->Shutdown(absl::Seconds(1));
      server_->Wait();
    }
  }

  static std::string* dir_;
  std::unique_ptr<PredictionServer> server_;
  std::string address_;
};

std::string* ClientSecurityTest::dir_ = nullptr;

TEST_F(ClientSecurityTest, BearerTokenIsRequiredAndChecked) {
  const std::string token = RandomToken();
  ASSERT_TRUE(
      WriteFileAtomically(File("tokens"), absl::StrCat("# test\nalice ", token, "\n")).ok());
  Start([&](ServerOptions& o) { o.token_file = File("tokens"); });

  // Not retried: only UNAVAILABLE is (PredictionClientTest counts attempts).
  auto anonymous = ListDevices({});
  EXPECT_EQ(anonymous.status().code(), absl::StatusCode::kUnauthenticated) << anonymous.status();
  EXPECT_THAT(anonymous.status().message(), HasSubstr("Bearer"));

  ClientOptions wrong;
  wrong.bearer_token = RandomToken();
  auto rejected = ListDevices(wrong);
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(rejected.status().message(), ::testing::Not(HasSubstr(wrong.bearer_token)));

  ClientOptions right;
  right.bearer_token = token;
  auto accepted = ListDevices(right);
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  EXPECT_GT(accepted->devices_size(), 0);
}

TEST_F(ClientSecurityTest, TlsClientVerifiesTheServer) {
  Start([&](ServerOptions& o) {
    o.tls.cert_file = File("server.pem");
    o.tls.key_file = File("server.key");
  });
  // Plaintext against TLS: the handshake fails.
  EXPECT_EQ(ListDevices({}).status().code(), absl::StatusCode::kUnavailable);

  ClientOptions tls;
  tls.tls.enabled = true;
  tls.tls.ca_file = File("ca.pem");
  auto ok = ListDevices(tls);
  ASSERT_TRUE(ok.ok()) << ok.status();

  // A CA that did not sign the server's certificate.
  ClientOptions other = tls;
  other.tls.ca_file = File("other_ca.pem");
  EXPECT_EQ(ListDevices(other).status().code(), absl::StatusCode::kUnavailable);

  // A name the certificate does not carry.
  ClientOptions wrong_name = tls;
  wrong_name.tls.server_name = "not-the-server.example";
  EXPECT_EQ(ListDevices(wrong_name).status().code(), absl::StatusCode::kUnavailable);
  // One it does carry.
  ClientOptions right_name = tls;
  right_name.tls.server_name = "localhost";
  EXPECT_TRUE(ListDevices(right_name).ok());
}

TEST_F(ClientSecurityTest, MutualTlsRequiresAClientCertificate) {
  const std::string token = RandomToken();
  ASSERT_TRUE(WriteFileAtomically(File("tokens2"), absl::StrCat("bob ", token, "\n")).ok());
  Start([&](ServerOptions& o) {
    o.tls.cert_file = File("server.pem");
    o.tls.key_file = File("server.key");
    o.tls.client_ca_file = File("ca.pem");
    o.token_file = File("tokens2");
  });
  ClientOptions no_cert;
  no_cert.tls.enabled = true;
  no_cert.tls.ca_file = File("ca.pem");
  no_cert.bearer_token = token;
  EXPECT_EQ(ListDevices(no_cert).status().code(), absl::StatusCode::kUnavailable);

  ClientOptions with_cert = no_cert;
  with_cert.tls.cert_file = File("client.pem");
  with_cert.tls.key_file = File("client.key");
  auto ok = ListDevices(with_cert);
  ASSERT_TRUE(ok.ok()) << ok.status();

  // TLS does not replace the token.
  ClientOptions cert_only = with_cert;
  cert_only.bearer_token.clear();
  EXPECT_EQ(ListDevices(cert_only).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(ClientSecurityTest, CliReachesATlsServerWithAToken) {
  const std::string token = RandomToken();
  ASSERT_TRUE(WriteFileAtomically(File("tokens3"), absl::StrCat("carol ", token, "\n")).ok());
  ASSERT_TRUE(WriteFileAtomically(File("carol.token"), token + "\n").ok());
  Start([&](ServerOptions& o) {
    o.tls.cert_file = File("server.pem");
    o.tls.key_file = File("server.key");
    o.token_file = File("tokens3");
  });
  CliEnvironment env;
  env.default_data_dir = HABITAT_DATA_DIR;
  auto run = [&](std::vector<std::string> args, std::string* out, std::string* err) {
    std::ostringstream out_stream, err_stream;
    const int code = RunHabitatCli(args, env, out_stream, err_stream);
    *out = out_stream.str();
    *err = err_stream.str();
    return code;
  };
  std::string out, err;
  EXPECT_EQ(run({"devices", "--server", address_, "--tls-ca", File("ca.pem"), "--token-file",
                 File("carol.token"), "--format", "csv"},
                &out, &err),
            kExitOk)
      << err;
  EXPECT_THAT(out, HasSubstr("H100-SXM"));
  // `habitat health` (the image's HEALTHCHECK) needs no token, over TLS too.
  EXPECT_EQ(run({"health", "--server", address_, "--tls-ca", File("ca.pem")}, &out, &err), kExitOk)
      << err;
  EXPECT_EQ(out, "SERVING\n");
  EXPECT_EQ(run({"health", "--server", address_, "--tls-ca", File("ca.pem"), "--service",
                 "habitat.v1.PredictionService"},
                &out, &err),
            kExitOk)
      << err;
  EXPECT_EQ(run({"health", "--server", address_, "--tls-ca", File("ca.pem"), "--service",
                 "no.such.Service"},
                &out, &err),
            kExitFailure);
  EXPECT_THAT(err, HasSubstr("service name unknown"));  // gRPC: NOT_FOUND
  EXPECT_EQ(run({"health", "--server", "127.0.0.1:1", "--timeout-s", "2"}, &out, &err),
            kExitFailure);
  EXPECT_THAT(err, HasSubstr("cannot reach"));
  // Without the token: the server's message reaches the user, exit 1.
  EXPECT_EQ(run({"devices", "--server", address_, "--tls-ca", File("ca.pem")}, &out, &err),
            kExitFailure);
  EXPECT_THAT(err, HasSubstr("Bearer"));
  // Plaintext to a TLS port: names the address.
  EXPECT_EQ(
      run({"catalogs", "--server", address_, "--token-file", File("carol.token")}, &out, &err),
      kExitFailure);
  EXPECT_THAT(err, HasSubstr(address_));
}

}  // namespace
}  // namespace habitat
