// The habitat-agent executable against an in-process PredictionServer:
// `ship`, the spool daemon with SIGTERM, and command-line errors.
#include <signal.h>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
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

using ::habitat::agent::testing::IdOf;
using ::habitat::agent::testing::WriteSpoolBytes;
using ::habitat::agent::testing::WriteSpoolTrace;
using ::habitat::testing::ChildProcess;
using ::habitat::testing::FilesWithSuffix;
using ::habitat::testing::ScratchDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

class AgentBinaryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto traces = ::habitat::testing::LoadFixtureTraces(3);
    ASSERT_TRUE(traces.ok()) << traces.status();
    traces_ = new std::vector<v1::Trace>(std::move(*traces));
  }
  static void TearDownTestSuite() { delete traces_; }

  void SetUp() override {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.backend.data_dir = HABITAT_DATA_DIR;
    auto server = PredictionServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
  }

  Result RunAgent(std::vector<std::string> args) {
    args.insert(args.begin(), HABITAT_AGENT_BINARY);
    ChildProcess child(args, tmp_.Sub("out"), tmp_.Sub("err"));
    const int status = child.Wait(absl::Seconds(60));
    Result result;
    result.exit_code = status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = child.Stdout();
    result.err = child.Stderr();
    return result;
  }

  static std::vector<v1::Trace>* traces_;
  ScratchDir tmp_;
  std::unique_ptr<PredictionServer> server_;
  std::string address_;
};
std::vector<v1::Trace>* AgentBinaryTest::traces_ = nullptr;

TEST_F(AgentBinaryTest, ShipPrintsTheIdAndIsIdempotent) {
  const std::string file = tmp_.Sub("resnet.trace.gz");
  std::string bytes;
  ASSERT_TRUE((*traces_)[0].SerializeToString(&bytes));
  auto gz = Gzip(bytes);
  ASSERT_TRUE(gz.ok());
  WriteSpoolBytes(tmp_.path(), "resnet.trace.gz", *gz);

  Result first = RunAgent({"ship", file, "--server=" + address_});
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, IdOf((*traces_)[0]) + "\n");
  EXPECT_THAT(first.err, HasSubstr("stored"));
  Result second = RunAgent({"ship", file, "--server=" + address_, "--predict_devices=H100-SXM"});
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.err, HasSubstr("already stored"));
  EXPECT_THAT(second.out, HasSubstr(IdOf((*traces_)[0])));
  EXPECT_THAT(second.out, MatchesRegex("(.|\n)*H100-SXM\t[0-9.]+ ms\n"));
}

TEST_F(AgentBinaryTest, HelpListsTheFlagsAndVersionNamesTheProgram) {
  const Result help = RunAgent({"--help"});
  EXPECT_THAT(help.out, HasSubstr("--spool_dir"));
  EXPECT_THAT(help.out, HasSubstr("--server"));
  EXPECT_THAT(help.out, Not(HasSubstr("No flags matched")));
  const Result version = RunAgent({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, ::testing::StartsWith("habitat-agent "));
}

TEST_F(AgentBinaryTest, ShipFailuresAndUsageErrors) {
  WriteSpoolBytes(tmp_.path(), "profile.json", "{\"traceEvents\": []}");
  Result json = RunAgent({"ship", tmp_.Sub("profile.json"), "--server=" + address_});
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_THAT(json.err, HasSubstr("is JSON"));
  Result missing = RunAgent({"ship", tmp_.Sub("nope.trace"), "--server=" + address_});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("nope.trace"));
  Result no_server = RunAgent({"ship", tmp_.Sub("profile.json")});
  EXPECT_EQ(no_server.exit_code, 2);
  EXPECT_THAT(no_server.err, HasSubstr("--server"));
  Result no_spool = RunAgent({"--server=" + address_});
  EXPECT_EQ(no_spool.exit_code, 2);
  EXPECT_THAT(no_spool.err, HasSubstr("--spool_dir"));
  Result unknown = RunAgent({"push", "x", "--server=" + address_});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("push"));

  // An invalid trace is the server's INVALID_ARGUMENT, reported.
  v1::Trace bad = (*traces_)[1];
  bad.mutable_operations(0)->mutable_forward()->set_time_ns(-1);
  WriteSpoolTrace(tmp_.path(), "bad.trace", bad, false);
  Result invalid = RunAgent({"ship", tmp_.Sub("bad.trace"), "--server=" + address_});
  EXPECT_EQ(invalid.exit_code, 1);
  EXPECT_THAT(invalid.err, HasSubstr("INVALID_ARGUMENT"));
}

TEST_F(AgentBinaryTest, DaemonShipsTheSpoolAndStopsOnSigterm) {
  const std::string spool = tmp_.Sub("spool");
  ChildProcess agent({HABITAT_AGENT_BINARY, "--spool_dir=" + spool, "--server=" + address_,
                      "--poll_ms=50", "--settle_s=0"},
                     tmp_.Sub("agent.out"), tmp_.Sub("agent.err"));
  agent.WaitForStderr("shipping traces", absl::Seconds(20));
  for (int i = 0; i < 3; ++i) {
    WriteSpoolTrace(spool, absl::StrCat("t", i, ".trace"), (*traces_)[i], i == 1);
  }
  WriteSpoolBytes(spool, "junk.trace", "not a trace");
  const absl::Time end = absl::Now() + absl::Seconds(30);
  while (!FilesWithSuffix(spool, ".trace").empty() && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(FilesWithSuffix(spool, ".trace"), IsEmpty()) << agent.Stderr();
  EXPECT_EQ(FilesWithSuffix(spool, ".done").size(), 3u);
  EXPECT_EQ(FilesWithSuffix(spool + "/rejected", ".reason").size(), 1u);

  // A second agent on the same spool refuses to start.
  Result second = RunAgent({"--spool_dir=" + spool, "--server=" + address_});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(second.err, HasSubstr("another habitat-agent"));

  ASSERT_TRUE(agent.Signal(SIGTERM));
  const int status = agent.Wait(absl::Seconds(10));
  ASSERT_NE(status, -1) << "habitat-agent did not stop within 10 s of SIGTERM";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string log = agent.Stderr();
  EXPECT_THAT(log, HasSubstr("uploaded 3 (0 already stored), recovered 0, rejected 1, "
                             "0 trace(s) left"));
  EXPECT_THAT(log, HasSubstr("rejected junk.trace"));
}

}  // namespace
}  // namespace habitat::agent
