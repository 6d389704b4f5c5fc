// The habitat-server binary with its trace store: uploads
// acknowledged before a SIGKILL are predicted from after a restart on the
// same SQLite file, tenants stay apart across restarts, retention runs at
// start-up, and the store flags are checked.
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/sidecar/spool_test_support.h"
#include "client/prediction_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/files.h"
#include "testing/metrics.h"
#include "testing/ports.h"

namespace habitat {
namespace {

using ::habitat::agent::testing::DistinctTraces;
using ::habitat::testing::ChildProcess;
using ::habitat::testing::ScratchDir;
using ::habitat::testing::UnusedPort;
using ::testing::HasSubstr;
using ::testing::Not;

class TraceStoreBinaryTest : public ::testing::Test {
 protected:
  // Starts habitat-server on `port_` with `flags`; waits until it serves.
  std::unique_ptr<ChildProcess> StartServer(const std::vector<std::string>& flags) {
    ++generation_;
    std::vector<std::string> args = {HABITAT_SERVER_BINARY, absl::StrCat("--address=", address_),
                                     "--metrics_address=127.0.0.1:0",
                                     absl::StrCat("--data_dir=", HABITAT_DATA_DIR)};
    args.insert(args.end(), flags.begin(), flags.end());
    auto server = std::make_unique<ChildProcess>(args, tmp_.Sub(absl::StrCat("out", generation_)),
                                                 tmp_.Sub(absl::StrCat("err", generation_)));
    const std::string log = server->WaitForStderr("serving on port", absl::Seconds(30));
    EXPECT_THAT(log, HasSubstr("serving on port")) << log;
    return server;
  }

  // SIGKILL: no drain, no destructors, nothing flushed by the server.
  static void Kill(ChildProcess& server) {
    ASSERT_TRUE(server.Signal(SIGKILL));
    ASSERT_NE(server.Wait(absl::Seconds(10)), -1);
  }

  std::unique_ptr<PredictionClient> Client(const std::string& token = "") {
    ClientOptions options;
    options.bearer_token = token;
    auto client = PredictionClient::Connect(address_, options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  static absl::StatusOr<v1::PredictResponse> PredictById(PredictionClient& client,
                                                         const std::string& id) {
    v1::PredictRequest request;
    request.set_trace_id(id);
    request.add_devices("V100-SXM2");
    request.add_devices("A100-SXM-40GB");
    return client.Predict(request);
  }

  static absl::StatusOr<std::string> Upload(PredictionClient& client, const v1::Trace& trace,
                                            bool* created = nullptr) {
    v1::UploadTraceRequest request;
    *request.mutable_trace() = trace;
    auto response = client.UploadTrace(request);
    if (!response.ok()) return response.status();
    if (created != nullptr) *created = response->created();
    return response->trace_id();
  }

  // habitat_stored_traces from the server's /metrics (port from its log).
  static double StoredTracesMetric(const ChildProcess& server) {
    const std::string log = server.Stderr();
    const size_t at = log.find("metrics on port ");
    if (at == std::string::npos) return -1;
    auto text = testing::ScrapeMetrics(std::stoi(log.substr(at + 16)));
    if (!text.ok()) return -1;
    const size_t value = text->find("\nhabitat_stored_traces ");
    return value == std::string::npos ? -1 : std::stod(text->substr(value + 23));
  }

  ScratchDir tmp_;
  const int port_ = UnusedPort();
  const std::string address_ = absl::StrCat("127.0.0.1:", port_);
  int generation_ = 0;
};

TEST_F(TraceStoreBinaryTest, AcknowledgedUploadsSurviveSigkillOnTheSqliteStore) {
  auto traces = DistinctTraces(/*fixtures=*/4, /*count=*/4);
  ASSERT_TRUE(traces.ok()) << traces.status();
  const std::string store = "--store=sqlite:" + tmp_.Sub("state/traces.db");
  std::vector<std::string> ids;
  std::vector<v1::PredictResponse> before;
  {
    auto server = StartServer({store});
    EXPECT_THAT(server->Stderr(),
                HasSubstr("trace store sqlite:" + tmp_.Sub("state/traces.db") +
                          " (kept forever; per tenant 10000 traces and 8192 MiB)"));
    auto client = Client();
    ASSERT_NE(client, nullptr);
    for (const auto& trace : *traces) {
      bool created = false;
      auto id = Upload(*client, trace, &created);
      ASSERT_TRUE(id.ok()) << id.status();
      EXPECT_TRUE(created);
      ids.push_back(*id);
      auto predicted = PredictById(*client, *id);
      ASSERT_TRUE(predicted.ok()) << predicted.status();
      before.push_back(*predicted);
    }
    // Killed right after the last acknowledgement.
    client.reset();
    Kill(*server);
  }

  auto server = StartServer({store});
  EXPECT_EQ(StoredTracesMetric(*server), static_cast<double>(ids.size()));
  EXPECT_THAT(server->Stderr(),
              HasSubstr(absl::StrCat("the trace store holds ", ids.size(), " traces")));
  auto client = Client();
  ASSERT_NE(client, nullptr);
  for (size_t i = 0; i < ids.size(); ++i) {
    auto predicted = PredictById(*client, ids[i]);
    ASSERT_TRUE(predicted.ok()) << ids[i] << ": " << predicted.status();
    ASSERT_EQ(predicted->predictions_size(), before[i].predictions_size());
    for (int d = 0; d < predicted->predictions_size(); ++d) {
      EXPECT_EQ(predicted->predictions(d).device_id(), before[i].predictions(d).device_id());
      EXPECT_EQ(predicted->predictions(d).gpu_time_ns(), before[i].predictions(d).gpu_time_ns());
    }
    bool created = true;
    ASSERT_TRUE(Upload(*client, (*traces)[i], &created).ok());
    EXPECT_FALSE(created) << "stored twice: " << ids[i];
  }
  EXPECT_EQ(StoredTracesMetric(*server), static_cast<double>(ids.size()));
}

// Uploads from several clients while the server is SIGKILLed: every id the
// server acknowledged is there after the restart.
TEST_F(TraceStoreBinaryTest, NothingAcknowledgedIsLostWhenKilledMidUpload) {
  constexpr int kClients = 4, kPerClient = 12;
  auto traces = DistinctTraces(/*fixtures=*/6, kClients * kPerClient);
  ASSERT_TRUE(traces.ok()) << traces.status();
  const std::string store = "--store=sqlite:" + tmp_.Sub("traces.db");
  auto server = StartServer({store});
  std::mutex mutex;
  std::vector<std::string> acknowledged;
  std::atomic<bool> killed{false};
  std::vector<std::thread> uploaders;
  for (int c = 0; c < kClients; ++c) {
    uploaders.emplace_back([&, c] {
      ClientOptions options;
      options.max_attempts = 1;  // no retry into the restarted server
      auto client = PredictionClient::Connect(address_, options);
      ASSERT_TRUE(client.ok());
      for (int i = 0; i < kPerClient && !killed; ++i) {
        auto id = Upload(**client, (*traces)[c * kPerClient + i]);
        if (!id.ok()) break;  // the server is gone
        std::lock_guard<std::mutex> lock(mutex);
        acknowledged.push_back(*id);
      }
    });
  }
  // Kill once a third are acknowledged, with uploads still in flight.
  for (int i = 0; i < 3000; ++i) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (acknowledged.size() >= kClients * kPerClient / 3) break;
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  Kill(*server);
  killed = true;
  for (auto& thread : uploaders) thread.join();
  ASSERT_GE(acknowledged.size(), static_cast<size_t>(kClients * kPerClient / 3));
  ASSERT_LT(acknowledged.size(), static_cast<size_t>(kClients * kPerClient))
      << "the kill came after every upload finished";

  server = StartServer({store});
  auto client = Client();
  ASSERT_NE(client, nullptr);
  for (const std::string& id : acknowledged) {
    auto predicted = PredictById(*client, id);
    EXPECT_TRUE(predicted.ok()) << "acknowledged " << id << " is lost: " << predicted.status();
  }
  EXPECT_GE(StoredTracesMetric(*server), static_cast<double>(acknowledged.size()));
}

TEST_F(TraceStoreBinaryTest, TenantsStayApartAcrossRestarts) {
  auto traces = DistinctTraces(1, 1);
  ASSERT_TRUE(traces.ok()) << traces.status();
  const std::string alpha_token = "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6";
  const std::string beta_token = "b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1";
  const std::string tokens = tmp_.Sub("tokens.txt");
  {
    std::FILE* file = std::fopen(tokens.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fprintf(file, "alpha %s\nbeta %s\n", alpha_token.c_str(), beta_token.c_str());
    std::fclose(file);
  }
  const std::vector<std::string> flags = {"--store=sqlite:" + tmp_.Sub("traces.db"),
                                          "--token_file=" + tokens};
  std::string id;
  {
    ASSERT_EQ(::chmod(tokens.c_str(), 0644), 0);
    auto server = StartServer(flags);
    EXPECT_THAT(server->Stderr(),
                HasSubstr("warning: --token_file '" + tokens +
                          "' has mode 0644: every user can read it; chmod 600 it"));
    EXPECT_THAT(server->Stderr(), Not(HasSubstr(alpha_token)));
    auto alpha = Client(alpha_token);
    auto uploaded = Upload(*alpha, (*traces)[0]);
    ASSERT_TRUE(uploaded.ok()) << uploaded.status();
    id = *uploaded;
    alpha.reset();
    Kill(*server);
  }
  ASSERT_EQ(::chmod(tokens.c_str(), 0640), 0);  // group read: a Kubernetes secret
  auto server = StartServer(flags);
  EXPECT_THAT(server->Stderr(), Not(HasSubstr("warning: --token_file")));
  auto alpha = Client(alpha_token);
  auto beta = Client(beta_token);
  EXPECT_TRUE(PredictById(*alpha, id).ok());
  auto foreign = PredictById(*beta, id);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kNotFound);
  // Word for word the answer for an id nobody uploaded.
  const std::string unknown = "sha256:" + std::string(64, 'e');
  std::string expected(PredictById(*beta, unknown).status().message());
  expected.replace(expected.find(unknown), unknown.size(), id);
  EXPECT_EQ(foreign.status().message(), expected);
}

// Retention at start-up on the real binary: a trace whose created_at is
// made three days old (in the file, as the passing of time would) is gone
// after a restart with --trace_retention_days=2; a new one stays.
TEST_F(TraceStoreBinaryTest, RetentionDeletesExpiredTracesAtStartUp) {
  auto traces = DistinctTraces(2, 2);
  ASSERT_TRUE(traces.ok()) << traces.status();
  const std::string path = tmp_.Sub("traces.db");
  std::string old_id, new_id;
  {
    auto server = StartServer({"--store=sqlite:" + path});
    auto client = Client();
    old_id = Upload(*client, (*traces)[0]).value_or("");
    new_id = Upload(*client, (*traces)[1]).value_or("");
    ASSERT_FALSE(old_id.empty() || new_id.empty());
    client.reset();
    ASSERT_TRUE(server->Signal(SIGTERM));
    ASSERT_NE(server->Wait(absl::Seconds(20)), -1);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string age =
      absl::StrCat("UPDATE habitat_traces SET created_at = created_at - ",
                   absl::ToInt64Nanoseconds(absl::Hours(72)), " WHERE id = '", old_id, "'");
  EXPECT_EQ(sqlite3_exec(db, age.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);

  auto server = StartServer({"--store=sqlite:" + path, "--trace_retention_days=2"});
  const std::string log = server->Stderr();
  EXPECT_THAT(log, HasSubstr("(retention 2 days; per tenant"));
  EXPECT_THAT(log, HasSubstr("trace retention: deleted 1 trace(s)"));
  auto client = Client();
  EXPECT_EQ(PredictById(*client, old_id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(PredictById(*client, new_id).ok());
  EXPECT_EQ(StoredTracesMetric(*server), 1);
}

// One tenant cannot fill the store for all: past its quota an upload is
// RESOURCE_EXHAUSTED with the reason, and the traces it has stay usable.
TEST_F(TraceStoreBinaryTest, ATenantPastItsQuotaIsRefusedWithTheReason) {
  auto traces = DistinctTraces(/*fixtures=*/3, /*count=*/3);
  ASSERT_TRUE(traces.ok()) << traces.status();
  auto server = StartServer({"--store=sqlite:" + tmp_.Sub("traces.db"), "--tenant_max_traces=2"});
  EXPECT_THAT(server->Stderr(), HasSubstr("per tenant 2 traces and 8192 MiB"));
  auto client = Client();
  ASSERT_NE(client, nullptr);
  auto first = Upload(*client, (*traces)[0]);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(Upload(*client, (*traces)[1]).ok());
  auto third = Upload(*client, (*traces)[2]);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
  EXPECT_THAT(third.status().message(), HasSubstr("quota for this tenant is full: 2 traces"));
  EXPECT_THAT(third.status().message(), HasSubstr("--tenant_max_traces"));
  EXPECT_TRUE(Upload(*client, (*traces)[0]).ok());  // had it already
  EXPECT_TRUE(PredictById(*client, *first).ok());
  EXPECT_EQ(StoredTracesMetric(*server), 2.0);
}

TEST_F(TraceStoreBinaryTest, ADirectoryStoreKeepsOneFilePerTrace) {
  auto traces = DistinctTraces(1, 1);
  ASSERT_TRUE(traces.ok()) << traces.status();
  const std::string dir = tmp_.Sub("traces");
  auto server = StartServer({"--store=dir:" + dir});
  EXPECT_THAT(server->Stderr(), HasSubstr("trace store dir:" + dir));
  auto client = Client();
  auto id = Upload(*client, (*traces)[0]);
  ASSERT_TRUE(id.ok()) << id.status();
  struct stat info;
  EXPECT_EQ(::stat(absl::StrCat(dir, "/", id->substr(7), ".trace").c_str(), &info), 0);
}

TEST_F(TraceStoreBinaryTest, HelpListsTheFlagsAndVersionNamesTheProgram) {
  ChildProcess help({HABITAT_SERVER_BINARY, "--help"}, tmp_.Sub("help.out"), tmp_.Sub("help.err"));
  ASSERT_NE(help.Wait(absl::Seconds(30)), -1);
  EXPECT_THAT(help.Stdout(), HasSubstr("--store"));
  EXPECT_THAT(help.Stdout(), HasSubstr("--metrics_address"));
  EXPECT_THAT(help.Stdout(), Not(HasSubstr("No flags matched")));
  ChildProcess version({HABITAT_SERVER_BINARY, "--version"}, tmp_.Sub("version.out"),
                       tmp_.Sub("version.err"));
  const int status = version.Wait(absl::Seconds(30));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_THAT(version.Stdout(), ::testing::StartsWith("habitat-server "));
}

TEST_F(TraceStoreBinaryTest, BadStoreFlagsStopTheServerWithExitCode1) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--store=mysql:db"}, "--store: store 'mysql:db' is not known"},
      // The retired spelling is refused, not ignored: traces would go elsewhere.
      {{"--trace_dir=/tmp/x"}, "--trace_dir is retired: pass --store=dir:PATH"},
      {{"--default_catalog=nosuch"}, "the default catalog"},
      {{"--store=sqlite:" + tmp_.Sub("file/traces.db")}, tmp_.Sub("file/traces.db")},
      {{"--store=sqlite:" + tmp_.path()}, "open the database file"},
      // A store file truncated to 0 bytes is not silently a new, empty store.
      {{"--store=sqlite:" + tmp_.Sub("file")}, "exists but is empty"},
      {{"--store=postgres:host=" + tmp_.path() + " connect_timeout=2 password=hidden-pw"},
       "PostgreSQL trace store (host=" + tmp_.path()},
      {{"--trace_retention_days=-1"}, "--trace_retention_days must be >= 0"},
      {{"--tenant_max_traces=-1"}, "--tenant_max_traces and --tenant_max_mib must be >= 0"},
      {{"--tenant_max_mib=-5"}, "--tenant_max_traces and --tenant_max_mib must be >= 0"},
  };
  std::FILE* file = std::fopen(tmp_.Sub("file").c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fclose(file);
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> args = {
        HABITAT_SERVER_BINARY, "--address=127.0.0.1:0",
        "--metrics_address=", absl::StrCat("--data_dir=", HABITAT_DATA_DIR)};
    args.insert(args.end(), flags.begin(), flags.end());
    ChildProcess server(args, tmp_.Sub("bad.out"), tmp_.Sub("bad.err"));
    const int status = server.Wait(absl::Seconds(30));
    ASSERT_NE(status, -1) << flags[0];
    ASSERT_TRUE(WIFEXITED(status)) << flags[0];
    EXPECT_EQ(WEXITSTATUS(status), 1) << flags[0];
    EXPECT_THAT(server.Stderr(), HasSubstr("cannot start"));
    EXPECT_THAT(server.Stderr(), HasSubstr(message));
    EXPECT_THAT(server.Stderr(), ::testing::Not(HasSubstr("hidden-pw")));
  }
}

// The flags reach PredictionServer::Start unchecked, which refuses them; a
// value too large for its option is saturated, NaN made negative, neither
// wrapped into range.
TEST_F(TraceStoreBinaryTest, OutOfRangeFlagsStopTheServerWithExitCode1) {
  const std::pair<std::string, std::string> cases[] = {
      {"--max_message_mb=2048", "--max_message_mb must be 1..2047"},
      {"--max_message_mb=0", "--max_message_mb must be 1..2047"},
      {"--request_memory_mib=9223372036854775807", "--request_memory_mib must be 0..2^30"},
      {"--tenant_max_mib=-9223372036854775807",
       "--tenant_max_traces and --tenant_max_mib must be >= 0"},
      {"--max_request_seconds=nan", "--max_request_seconds must be >= 0"},
      {"--self_probe_seconds=nan", "--self_probe_seconds must be 0..1e9 seconds"},
      {"--handshake_timeout_seconds=1e10", "--handshake_timeout_seconds must be 0..1e9 seconds"},
      {"--max_trace_operations=0", "--max_trace_operations must be >= 1 (got 0)"},
      {"--cache_mib=-1", "--cache_mib must be >= 0"},
  };
  for (const auto& [flag, message] : cases) {
    ChildProcess server({HABITAT_SERVER_BINARY, "--address=127.0.0.1:0", "--metrics_address=",
                         "--store=memory", absl::StrCat("--data_dir=", HABITAT_DATA_DIR), flag},
                        tmp_.Sub("range.out"), tmp_.Sub("range.err"));
    const int status = server.Wait(absl::Seconds(30));
    ASSERT_NE(status, -1) << flag;
    ASSERT_TRUE(WIFEXITED(status)) << flag;
    EXPECT_EQ(WEXITSTATUS(status), 1) << flag;
    EXPECT_THAT(server.Stderr(), HasSubstr("cannot start: " + message)) << flag;
  }
}

}  // namespace
}  // namespace habitat
