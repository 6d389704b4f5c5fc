// habitat-agent against what the manifests deploy: an in-process server
// with TLS, client certificates and bearer tokens. The agent ships through
// them, and picks up a rotated token without a restart.
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/sidecar/spool_test_support.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/prediction_server.h"
#include "testing/child_process.h"
#include "testing/files.h"
#include "testing/kineto_fixtures.h"

namespace habitat::agent {
namespace {

using ::habitat::agent::testing::WriteSpoolTrace;
using ::habitat::testing::ChildProcess;
using ::habitat::testing::FilesWithSuffix;
using ::habitat::testing::ScratchDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kOldToken[] = "agentOld-7f3c9a1e5b2d4f60";
constexpr char kNewToken[] = "agentNew-0d8e2b7c4a9f1e35";

struct Result {
  int exit_code = -1;
  std::string err;
};

class AgentSecureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto traces = ::habitat::testing::LoadFixtureTraces(2);
    ASSERT_TRUE(traces.ok()) << traces.status();
    traces_ = new std::vector<v1::Trace>(std::move(*traces));
  }
  static void TearDownTestSuite() { delete traces_; }

  void SetUp() override {
    const std::string make_certs =
        absl::StrCat("bash '", HABITAT_CERT_SCRIPT, "' '", tmp_.Sub("pki"), "'");
    ASSERT_EQ(std::system(make_certs.c_str()), 0) << "the test certificates (openssl)";
    ASSERT_TRUE(
        WriteFileAtomically(tmp_.Sub("tokens.txt"), absl::StrCat("tenant-a ", kOldToken, "\n"))
            .ok());
    ASSERT_TRUE(WriteFileAtomically(tmp_.Sub("agent-token"), kOldToken).ok());
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.backend.data_dir = HABITAT_DATA_DIR;
    options.tls.cert_file = Pki("server.pem");
    options.tls.key_file = Pki("server.key");
    options.tls.client_ca_file = Pki("ca.pem");
    options.token_file = tmp_.Sub("tokens.txt");
    auto server = PredictionServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
  }

  std::string Pki(const std::string& name) const { return tmp_.Sub("pki/" + name); }

  // The flags of the deployed sidecar: the CA, the client certificate and
  // the token file.
  std::vector<std::string> SecureFlags() const {
    return {"--server=" + address_, "--tls_ca=" + Pki("ca.pem"), "--tls_cert=" + Pki("client.pem"),
            "--tls_key=" + Pki("client.key"), "--token_file=" + tmp_.Sub("agent-token")};
  }

  Result Ship(const std::string& file, std::vector<std::string> flags) {
    flags.insert(flags.begin(), {HABITAT_AGENT_BINARY, "ship", file, "--rpc_timeout_s=10"});
    ChildProcess child(flags, tmp_.Sub("ship.out"), tmp_.Sub("ship.err"));
    const int status = child.Wait(absl::Seconds(60));
    Result result;
    result.exit_code = status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.err = child.Stderr();
    return result;
  }

  // Waits (at most 30 s) until the spool holds no *.trace file.
  static bool Drained(const std::string& spool) {
    const absl::Time end = absl::Now() + absl::Seconds(30);
    while (!FilesWithSuffix(spool, ".trace").empty() && absl::Now() < end) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    return FilesWithSuffix(spool, ".trace").empty();
  }

  static std::vector<v1::Trace>* traces_;
  ScratchDir tmp_;
  std::unique_ptr<PredictionServer> server_;
  std::string address_;
};
std::vector<v1::Trace>* AgentSecureTest::traces_ = nullptr;

TEST_F(AgentSecureTest, ShipNeedsTheCaTheCertificateAndTheToken) {
  WriteSpoolTrace(tmp_.path(), "t.trace", (*traces_)[0], false);
  const std::string file = tmp_.Sub("t.trace");
  const std::vector<std::string> all = SecureFlags();
  const Result ok = Ship(file, all);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;

  const Result no_token = Ship(file, {all[0], all[1], all[2], all[3]});
  EXPECT_EQ(no_token.exit_code, 1);
  EXPECT_THAT(no_token.err, HasSubstr("UNAUTHENTICATED"));
  const Result no_certificate = Ship(file, {all[0], all[1], all[4]});
  EXPECT_EQ(no_certificate.exit_code, 1) << no_certificate.err;
  const Result plaintext = Ship(file, {all[0], all[4]});
  EXPECT_EQ(plaintext.exit_code, 1) << plaintext.err;
  const Result missing = Ship(file, {all[0], all[1], "--token_file=" + tmp_.Sub("nope")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--token_file"));
}

TEST_F(AgentSecureTest, DaemonShipsThroughTlsAndPicksUpARotatedToken) {
  const std::string spool = tmp_.Sub("spool");
  std::vector<std::string> args = SecureFlags();
  args.insert(args.begin(), {HABITAT_AGENT_BINARY, "--spool_dir=" + spool, "--poll_ms=50",
                             "--settle_s=0", "--initial_backoff_ms=50", "--max_backoff_s=1"});
  ChildProcess agent(args, tmp_.Sub("agent.out"), tmp_.Sub("agent.err"));
  agent.WaitForStderr("shipping traces", absl::Seconds(20));
  WriteSpoolTrace(spool, "t0.trace", (*traces_)[0], false);
  ASSERT_TRUE(Drained(spool)) << agent.Stderr();

  // Rotation as Kubernetes does it: the server's Secret loses the old
  // token (reloaded), the agent's mounted file is replaced whole.
  ASSERT_TRUE(
      WriteFileAtomically(tmp_.Sub("tokens.txt"), absl::StrCat("tenant-a ", kNewToken, "\n")).ok());
  ASSERT_TRUE(server_->ReloadTokens().ok());
  ASSERT_TRUE(WriteFileAtomically(tmp_.Sub("agent-token"), kNewToken).ok());
  WriteSpoolTrace(spool, "t1.trace", (*traces_)[1], true);
  EXPECT_TRUE(Drained(spool)) << "the agent kept the retired token:\n" << agent.Stderr();
  EXPECT_THAT(FilesWithSuffix(spool + "/rejected", ".reason"), IsEmpty());

  ASSERT_TRUE(agent.Signal(SIGTERM));
  const int status = agent.Wait(absl::Seconds(10));
  ASSERT_NE(status, -1) << "habitat-agent did not stop within 10 s of SIGTERM";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_THAT(agent.Stderr(), HasSubstr("uploaded 2 (0 already stored)"));
}

}  // namespace
}  // namespace habitat::agent
