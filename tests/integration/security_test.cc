// TLS, client certificates, bearer tokens and tenant isolation of a real
// in-process habitat-server, plus the habitat-server binary with all of them
// on. Certificates come from a throwaway CA made with the openssl CLI at
// test time; nothing secret is checked in.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/child_process.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "habitat/v1/prediction_service.grpc.pb.h"
#include "server/prediction_server.h"
#include "testing/health_check.h"
#include "testing/kineto_fixtures.h"
#include "testing/metrics.h"
#include "tests/integration/raw_grpc.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAlphaToken[] = "alpha-7f3c9a1e5b2d4f60";
constexpr char kBetaToken[] = "beta-0d8e2b7c4a9f1e35";
constexpr char kGammaToken[] = "gamma-5a1f9c3e7b0d2e48";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A CA, a server certificate for localhost/127.0.0.1, a client certificate,
// and a second CA with its own client certificate (trusted by nobody).
class Pki {
 public:
  static absl::StatusOr<Pki> Create() {
    Pki pki;
    char pattern[] = "/tmp/habitat-pki-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return absl::InternalError("mkdtemp failed");
    pki.dir_ = pattern;
    const std::string d = pki.dir_;
    WriteText(d + "/server.ext",
              "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
    WriteText(d + "/client.ext", "extendedKeyUsage=clientAuth\n");
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string script = absl::StrCat(
        "set -e; cd ", d, "\n", "for ca in ca other_ca; do openssl req -x509 ", key,
        " -keyout $ca.key -out $ca.pem ", "-days 2 -subj /CN=habitat-test-$ca; done\n",
        "sign() { openssl req ", key, " -keyout $1.key -out $1.csr -subj /CN=$2; ",
        "openssl x509 -req -in $1.csr -CA $3.pem -CAkey $3.key -CAcreateserial -out $1.pem ",
        "-days 2 -extfile $4; }\n", "sign server localhost ca server.ext\n",
        "sign client habitat-client ca client.ext\n",
        "sign rogue_client rogue other_ca client.ext\n",
        "sign other_server localhost other_ca server.ext\n",
        // Refused by Debian's OpenSSL (security level 2) in any handshake:
        // a 1024-bit RSA key, and a certificate signed with SHA-1.
        "openssl req -newkey rsa:1024 -nodes -keyout weak_rsa.key -out weak_rsa.csr ",
        "-subj /CN=localhost\n",
        "openssl x509 -req -in weak_rsa.csr -CA ca.pem -CAkey ca.key -CAcreateserial ",
        "-out weak_rsa.pem -days 2 -extfile server.ext\n", "openssl req ", key,
        " -keyout sha1.key -out sha1.csr -subj /CN=localhost\n",
        "openssl x509 -req -sha1 -in sha1.csr -CA ca.pem -CAkey ca.key -CAcreateserial ",
        "-out sha1.pem -days 2 -extfile server.ext\n");
    WriteText(d + "/make.sh", script);
    const std::string command = absl::StrCat("sh ", d, "/make.sh > ", d, "/openssl.log 2>&1");
    if (std::system(command.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("openssl failed: ", ReadText(d + "/openssl.log")));
    }
    return pki;
  }

  std::string Path(const std::string& name) const { return absl::StrCat(dir_, "/", name); }
  void Remove() const { std::system(absl::StrCat("rm -rf '", dir_, "'").c_str()); }
  std::string Pem(const std::string& name) const { return ReadText(Path(name)); }

 private:
  std::string dir_;
};

std::shared_ptr<grpc::Channel> TlsChannel(const Pki& pki, int port,
                                          const std::string& client_name = "",
                                          const std::string& ca = "ca.pem") {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pki.Pem(ca);
  if (!client_name.empty()) {
    ssl.pem_private_key = pki.Pem(client_name + ".key");
    ssl.pem_cert_chain = pki.Pem(client_name + ".pem");
  }
  // An IP target with the certificate's name as override: no DNS lookup
  // (c-ares leaks a little per lookup, which LeakSanitizer reports).
  grpc::ChannelArguments arguments;
  arguments.SetSslTargetNameOverride("localhost");
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), grpc::SslCredentials(ssl),
                                   arguments);
}

std::shared_ptr<grpc::Channel> PlainChannel(int port) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
}

// A Predict/ListDevices/UploadTrace through the generated stub with an
// optional bearer token.
class Caller {
 public:
  Caller(std::shared_ptr<grpc::Channel> channel, std::string token = "")
      : stub_(v1::PredictionService::NewStub(std::move(channel))), token_(std::move(token)) {}

  grpc::Status ListDevices() {
    v1::ListDevicesResponse response;
    auto context = Context();
    return stub_->ListDevices(context.get(), v1::ListDevicesRequest(), &response);
  }
  grpc::Status Upload(const v1::Trace& trace, v1::UploadTraceResponse* response) {
    v1::UploadTraceRequest request;
    *request.mutable_trace() = trace;
    auto context = Context();
    return stub_->UploadTrace(context.get(), request, response);
  }
  grpc::Status PredictById(const std::string& id, v1::PredictResponse* response = nullptr) {
    v1::PredictRequest request;
    request.set_trace_id(id);
    request.add_devices("H200");
    v1::PredictResponse ignored;
    auto context = Context();
    return stub_->Predict(context.get(), request, response ? response : &ignored);
  }

 private:
  std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!token_.empty()) context->AddMetadata("authorization", "Bearer " + token_);
    return context;
  }

  std::unique_ptr<v1::PredictionService::Stub> stub_;
  std::string token_;
};

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(std::system("openssl version > /dev/null 2>&1"), 0)
        << "the openssl CLI (Debian package openssl) is needed";
    auto pki = Pki::Create();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new Pki(std::move(*pki));
    auto trace = testing::LoadFixtureTrace(testing::kFixtureTrace);
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = new v1::Trace(std::move(*trace));
  }
  static void TearDownTestSuite() {
    if (pki_ != nullptr) pki_->Remove();
    delete pki_;
    delete trace_;
  }

  void TearDown() override { Stop(); }

  ServerOptions BaseOptions() const {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.metrics_address = "127.0.0.1:0";
    options.backend.data_dir = HABITAT_DATA_DIR;
    return options;
  }
  ServerOptions TlsOptions(bool require_client_cert) const {
    ServerOptions options = BaseOptions();
    options.tls.cert_file = pki_->Path("server.pem");
    options.tls.key_file = pki_->Path("server.key");
    if (require_client_cert) options.tls.client_ca_file = pki_->Path("ca.pem");
    return options;
  }
  // Files of one test live in this process's own PKI directory, so tests
  // running in parallel never share them.
  std::string TokenFile(const std::string& text) const {
    const std::string path = pki_->Path("tokens.txt");
    WriteText(path, text);
    return path;
  }
  void Start(const ServerOptions& options) {
    auto server = PredictionServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void Stop() {
    if (server_ == nullptr) return;
    server_->Shutdown(absl::Seconds(1));
    server_->Wait();
    server_.reset();
  }

  static Pki* pki_;
  static v1::Trace* trace_;
  std::unique_ptr<PredictionServer> server_;
};

Pki* SecurityTest::pki_ = nullptr;
v1::Trace* SecurityTest::trace_ = nullptr;

TEST_F(SecurityTest, TlsServerAcceptsTlsClientsAndRejectsPlaintext) {
  ASSERT_NO_FATAL_FAILURE(Start(TlsOptions(false)));
  Caller tls(TlsChannel(*pki_, server_->port()));
  EXPECT_TRUE(tls.ListDevices().ok());
  v1::UploadTraceResponse uploaded;
  ASSERT_TRUE(tls.Upload(*trace_, &uploaded).ok());
  v1::PredictResponse predicted;
  grpc::Status status = tls.PredictById(uploaded.trace_id(), &predicted);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(predicted.predictions_size(), 1);

  Caller plain(PlainChannel(server_->port()));
  EXPECT_EQ(plain.ListDevices().error_code(), grpc::StatusCode::UNAVAILABLE);
  // A client that does not trust the server's CA refuses the handshake.
  Caller untrusting(TlsChannel(*pki_, server_->port(), "", "other_ca.pem"));
  EXPECT_EQ(untrusting.ListDevices().error_code(), grpc::StatusCode::UNAVAILABLE);
  // Health is a gRPC service on the same port: over TLS.
  EXPECT_EQ(
      testing::CheckHealth(TlsChannel(*pki_, server_->port()), absl::Seconds(10)).value_or(-1), 1);
  EXPECT_EQ(testing::CheckHealth(PlainChannel(server_->port()), absl::Seconds(10)).value_or(-1),
            -1);
  // Metrics stay plain HTTP on their own port.
  auto metrics = testing::ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, HasSubstr("habitat_requests_total"));
}

TEST_F(SecurityTest, ClientCertificatesAreRequiredAndVerified) {
  ASSERT_NO_FATAL_FAILURE(Start(TlsOptions(true)));
  EXPECT_TRUE(Caller(TlsChannel(*pki_, server_->port(), "client")).ListDevices().ok());
  EXPECT_EQ(Caller(TlsChannel(*pki_, server_->port())).ListDevices().error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // Signed by a CA the server does not trust.
  EXPECT_EQ(Caller(TlsChannel(*pki_, server_->port(), "rogue_client")).ListDevices().error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Caller(PlainChannel(server_->port())).ListDevices().error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecurityTest, PlaintextHealthPortServesOnlyHealthForProbes) {
  ServerOptions options = TlsOptions(true);
  options.health_address = "127.0.0.1:0";
  options.token_file = TokenFile(absl::StrCat("alpha ", kAlphaToken, "\n"));
  ASSERT_NO_FATAL_FAILURE(Start(options));
  ASSERT_GT(server_->health_port(), 0);
  auto probe = PlainChannel(server_->health_port());
  EXPECT_EQ(testing::CheckHealth(probe, absl::Seconds(10)).value_or(-1),
            1);  // no certificate, no token
  // Nothing else is served there: not the prediction service, not reflection.
  Caller on_health_port(probe, kAlphaToken);
  EXPECT_EQ(on_health_port.ListDevices().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  auto reflection = testing::RawUnaryCall(
      probe, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "");
  EXPECT_EQ(reflection.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);

  // Draining: the probe port reports NOT_SERVING or is gone.
  server_->Shutdown(absl::Seconds(1));
  const int after = testing::CheckHealth(probe, absl::Seconds(10)).value_or(-1);
  EXPECT_NE(after, 1);
  server_->Wait();
  server_.reset();
}

TEST_F(SecurityTest, BadTlsFilesFailAtStartNamingTheFile) {
  const std::string not_pem = pki_->Path("not_a_cert.pem");
  WriteText(not_pem, "hello\n");
  struct Case {
    std::string cert, key, ca, expected;
  };
  const Case cases[] = {
      {pki_->Path("server.pem"), "", "", "TLS needs both --tls_cert and --tls_key"},
      {"", pki_->Path("server.key"), "", "TLS needs both --tls_cert and --tls_key"},
      {"", "", pki_->Path("ca.pem"), "--tls_client_ca needs --tls_cert and --tls_key"},
      {"/nonexistent/server.pem", pki_->Path("server.key"), "",
       "--tls_cert: cannot read '/nonexistent/server.pem'"},
      {pki_->Path("server.pem"), "/nonexistent/server.key", "",
       "--tls_key: cannot read '/nonexistent/server.key'"},
      {not_pem, pki_->Path("server.key"), "",
       absl::StrCat("--tls_cert: '", not_pem, "' holds no PEM certificate")},
      {pki_->Path("server.pem"), not_pem, "",
       absl::StrCat("--tls_key: '", not_pem, "' holds no unencrypted PEM")},
      {pki_->Path("server.pem"), pki_->Path("client.key"), "",
       absl::StrCat("the key in '", pki_->Path("client.key"), "' does not match")},
      {pki_->Path("server.pem"), pki_->Path("server.key"), not_pem,
       absl::StrCat("--tls_client_ca: '", not_pem, "' holds no PEM certificate")},
      // Once "cannot listen on 127.0.0.1:0": gRPC's OpenSSL refused them.
      {pki_->Path("weak_rsa.pem"), pki_->Path("weak_rsa.key"), "",
       absl::StrCat("--tls_key: the RSA key in '", pki_->Path("weak_rsa.key"),
                    "' has 1024 bits (80 bits of security), too weak")},
      {pki_->Path("sha1.pem"), pki_->Path("sha1.key"), "",
       absl::StrCat("--tls_cert: the certificate in '", pki_->Path("sha1.pem"),
                    "' is signed with a digest too weak")},
  };
  for (const auto& c : cases) {
    ServerOptions options = BaseOptions();
    options.tls.cert_file = c.cert;
    options.tls.key_file = c.key;
    options.tls.client_ca_file = c.ca;
    auto server = PredictionServer::Start(options);
    ASSERT_FALSE(server.ok()) << c.expected;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(server.status().message()), HasSubstr(c.expected));
  }
  ServerOptions bad_tokens = BaseOptions();
  bad_tokens.token_file = TokenFile(absl::StrCat("a ", kAlphaToken, "\nb ", kAlphaToken, "\n"));
  auto server = PredictionServer::Start(bad_tokens);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("line 2"));
  EXPECT_THAT(std::string(server.status().message()), Not(HasSubstr(kAlphaToken)));
}

TEST_F(SecurityTest, TokensAuthenticateAndTenantsAreIsolated) {
  ServerOptions options = BaseOptions();
  options.token_file =
      TokenFile(absl::StrCat("# tenants\nalpha ", kAlphaToken, "\nbeta ", kBetaToken, "\n"));
  ASSERT_NO_FATAL_FAILURE(Start(options));
  auto channel = PlainChannel(server_->port());
  Caller anonymous(channel), wrong(channel, "not-a-real-token-1234567"),
      alpha(channel, kAlphaToken), beta(channel, kBetaToken);

  grpc::Status missing = anonymous.ListDevices();
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(missing.error_message(), HasSubstr("missing `authorization: Bearer <token>`"));
  grpc::Status rejected = wrong.ListDevices();
  EXPECT_EQ(rejected.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(rejected.error_message(), HasSubstr("not valid on this server"));
  EXPECT_THAT(rejected.error_message(), Not(HasSubstr("not-a-real-token")));
  v1::UploadTraceResponse ignored;
  EXPECT_EQ(anonymous.Upload(*trace_, &ignored).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(anonymous.PredictById("sha256:" + std::string(64, '0')).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // Probes need no token, and neither does reflection (it only describes
  // the public API): ServerReflectionRequest{list_services: ""}.
  EXPECT_EQ(testing::CheckHealth(channel, absl::Seconds(10)).value_or(-1), 1);
  auto reflection = testing::RawUnaryCall(
      channel, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      std::string("\x3a\x00", 2));
  ASSERT_TRUE(reflection.status.ok()) << reflection.status.error_message();
  EXPECT_THAT(reflection.response, HasSubstr("habitat.v1.PredictionService"));
  EXPECT_TRUE(alpha.ListDevices().ok());

  v1::UploadTraceResponse first, again;
  ASSERT_TRUE(alpha.Upload(*trace_, &first).ok());
  ASSERT_TRUE(alpha.Upload(*trace_, &again).ok());
  EXPECT_TRUE(first.created());
  EXPECT_FALSE(again.created());  // same trace, same tenant: same id
  EXPECT_EQ(again.trace_id(), first.trace_id());
  EXPECT_TRUE(alpha.PredictById(first.trace_id()).ok());

  // Beta cannot use alpha's id, and cannot tell it from an id nobody uploaded.
  const std::string unknown_id = "sha256:" + std::string(64, 'e');
  grpc::Status foreign = beta.PredictById(first.trace_id());
  grpc::Status unknown = beta.PredictById(unknown_id);
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(foreign.error_message(),
            absl::StrReplaceAll(unknown.error_message(), {{unknown_id, first.trace_id()}}));
  // Uploading the same trace does not reveal that alpha holds it either:
  // beta's namespace did not have it, so it is created there.
  v1::UploadTraceResponse beta_copy;
  ASSERT_TRUE(beta.Upload(*trace_, &beta_copy).ok());
  EXPECT_TRUE(beta_copy.created());
  EXPECT_EQ(beta_copy.trace_id(), first.trace_id());
  EXPECT_TRUE(beta.PredictById(first.trace_id()).ok());
}

TEST_F(SecurityTest, ReloadAddsAndRetiresTokensWithoutRestart) {
  ServerOptions options = BaseOptions();
  const std::string tokens = TokenFile(absl::StrCat("alpha ", kAlphaToken, "\n"));
  options.token_file = tokens;
  ASSERT_NO_FATAL_FAILURE(Start(options));
  auto channel = PlainChannel(server_->port());
  Caller alpha(channel, kAlphaToken), gamma(channel, kGammaToken);
  v1::UploadTraceResponse uploaded;
  ASSERT_TRUE(alpha.Upload(*trace_, &uploaded).ok());
  EXPECT_EQ(gamma.ListDevices().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // What SIGHUP does in habitat-server: gamma added, alpha kept.
  WriteText(tokens, absl::StrCat("alpha ", kAlphaToken, "\ngamma ", kGammaToken, "\n"));
  auto loaded = server_->ReloadTokens();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, 2u);
  EXPECT_TRUE(gamma.ListDevices().ok());
  EXPECT_EQ(gamma.PredictById(uploaded.trace_id()).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(alpha.PredictById(uploaded.trace_id()).ok());  // the store kept alpha's trace

  // A broken file is refused and the tokens in force stay.
  WriteText(tokens, "gamma short\n");
  auto broken = server_->ReloadTokens();
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr("line 1"));
  EXPECT_TRUE(gamma.ListDevices().ok());
  EXPECT_TRUE(alpha.ListDevices().ok());

  // Retiring alpha's token locks alpha out at once.
  WriteText(tokens, absl::StrCat("gamma ", kGammaToken, "\n"));
  ASSERT_TRUE(server_->ReloadTokens().ok());
  EXPECT_EQ(alpha.ListDevices().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(gamma.ListDevices().ok());

  auto metrics = testing::ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok());
  const auto reloads = testing::CounterValues(*metrics, "habitat_token_reloads_total");
  EXPECT_EQ(reloads.at("result=ok"), 2);
  EXPECT_EQ(reloads.at("result=error"), 1);
}

TEST_F(SecurityTest, TenantNamespacesPersistAcrossRestarts) {
  const std::string traces = pki_->Path("traces");
  ServerOptions options = BaseOptions();
  options.store = "dir:" + traces;
  options.token_file = TokenFile(absl::StrCat("alpha ", kAlphaToken, "\nbeta ", kBetaToken, "\n"));
  ASSERT_NO_FATAL_FAILURE(Start(options));
  v1::UploadTraceResponse uploaded;
  {
    Caller alpha(PlainChannel(server_->port()), kAlphaToken);
    ASSERT_TRUE(alpha.Upload(*trace_, &uploaded).ok());
  }
  const std::string hex = uploaded.trace_id().substr(uploaded.trace_id().find(':') + 1);
  struct stat info;
  EXPECT_EQ(stat(absl::StrCat(traces, "/tenants/alpha/", hex, ".trace").c_str(), &info), 0);
  Stop();

  ASSERT_NO_FATAL_FAILURE(Start(options));
  auto channel = PlainChannel(server_->port());
  Caller alpha(channel, kAlphaToken), beta(channel, kBetaToken);
  EXPECT_TRUE(alpha.PredictById(uploaded.trace_id()).ok());
  EXPECT_EQ(beta.PredictById(uploaded.trace_id()).error_code(), grpc::StatusCode::NOT_FOUND);
  auto metrics = testing::ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(*metrics, HasSubstr("habitat_stored_traces 1"));
}

// The habitat-server binary with TLS, client certificates, tokens and a
// probe port from its flags; SIGHUP reloads the tokens; SIGTERM stops it.
TEST_F(SecurityTest, ServerBinaryWithTlsTokensAndSighupReload) {
  const std::string tokens = TokenFile(absl::StrCat("alpha ", kAlphaToken, "\n"));
  const std::string log = pki_->Path("server.log");
  const std::vector<std::string> args = {HABITAT_SERVER_BINARY,
                                         "--address=127.0.0.1:0",
                                         "--metrics_address=",
                                         "--store=memory",
                                         "--health_address=127.0.0.1:0",
                                         absl::StrCat("--data_dir=", HABITAT_DATA_DIR),
                                         absl::StrCat("--tls_cert=", pki_->Path("server.pem")),
                                         absl::StrCat("--tls_key=", pki_->Path("server.key")),
                                         absl::StrCat("--tls_client_ca=", pki_->Path("ca.pem")),
                                         absl::StrCat("--token_file=", tokens),
                                         "--shutdown_grace_seconds=1"};
  ChildOptions options;
  options.stderr_path = log;
  const absl::StatusOr<pid_t> started = StartChild(args, options);
  ASSERT_TRUE(started.ok()) << started.status();
  const pid_t pid = *started;
  // Waits until the log matches `pattern`; the log so far.
  auto wait_for = [&](const std::regex& pattern) {
    std::string text;
    for (int i = 0; i < 300 && !std::regex_search(text, pattern); ++i) {
      absl::SleepFor(absl::Milliseconds(100));
      text = ReadText(log);
    }
    return text;
  };
  const std::regex serving(
      R"(serving on port (\d+) \(TLS, bearer tokens;.*health-only port (\d+)\))");
  std::string text = wait_for(serving);
  std::smatch ports;
  ASSERT_TRUE(std::regex_search(text, ports, serving)) << text;
  const int port = std::stoi(ports[1].str());
  const int health_port = std::stoi(ports[2].str());

  EXPECT_EQ(testing::CheckHealth(PlainChannel(health_port), absl::Seconds(10)).value_or(-1), 1);
  auto channel = TlsChannel(*pki_, port, "client");
  EXPECT_TRUE(Caller(channel, kAlphaToken).ListDevices().ok());
  EXPECT_EQ(Caller(channel).ListDevices().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Caller(channel, kBetaToken).ListDevices().error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Caller(TlsChannel(*pki_, port)).ListDevices().error_code(),
            grpc::StatusCode::UNAVAILABLE);  // no client certificate

  WriteText(tokens, absl::StrCat("alpha ", kAlphaToken, "\nbeta ", kBetaToken, "\n"));
  ASSERT_EQ(kill(pid, SIGHUP), 0);
  text = wait_for(std::regex("reloaded 2 tokens"));
  EXPECT_THAT(text, HasSubstr("reloaded 2 tokens"));
  EXPECT_TRUE(Caller(channel, kBetaToken).ListDevices().ok());

  WriteText(tokens, "broken\n");
  ASSERT_EQ(kill(pid, SIGHUP), 0);
  text = wait_for(std::regex("tokens not reloaded"));
  EXPECT_THAT(text, HasSubstr("tokens not reloaded, the old ones stay"));
  EXPECT_TRUE(Caller(channel, kBetaToken).ListDevices().ok());

  channel.reset();
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = -1;
  for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) != pid; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(WIFEXITED(status)) << ReadText(log);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(SecurityTest, ServerBinaryRefusesToStartWithBadTlsFlags) {
  const std::string log = pki_->Path("bad_tls.log");
  const std::string command = absl::StrCat(
      HABITAT_SERVER_BINARY,
      " --address=127.0.0.1:0 --metrics_address= --data_dir=", HABITAT_DATA_DIR,
      " --tls_cert=", pki_->Path("server.pem"), " --tls_key=/nonexistent/key.pem 2> ", log);
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_THAT(ReadText(log),
              HasSubstr("cannot start: --tls_key: cannot read '/nonexistent/key.pem'"));
}

}  // namespace
}  // namespace habitat
