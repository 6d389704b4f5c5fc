// The PostgreSQL store against a real server started from Debian's
// binaries: the conformance suite, two replicas on one database, a server
// restart under a live store, and connection errors.
#include "server/persistence/postgres_trace_store.h"

#include <libpq-fe.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/store/trace_store_conformance.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/persistence/postgres_test_server.h"
#include "server/persistence/trace_store_factory.h"

namespace habitat::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// One server per test process (ctest runs each test in its own), started
// on first use and stopped at exit. Null only when PostgreSQL is not
// installed; any other failure to start fails the test.
std::unique_ptr<PostgresTestServer> server;

PostgresTestServer* Server() {
  static const bool started = [] {
    auto result = PostgresTestServer::Start();
    if (result.ok()) {
      server = *std::move(result);
    } else if (result.status().code() != absl::StatusCode::kNotFound) {
      ADD_FAILURE() << "cannot start PostgreSQL: " << result.status();
    }
    return true;
  }();
  (void)started;
  return server.get();
}

#define REQUIRE_POSTGRES()                                                 \
  if (Server() == nullptr) {                                               \
    GTEST_SKIP() << PostgresTestServer::FindBinaries().status().message(); \
  }

class PostgresUnderTest : public StoreUnderTest {
 public:
  explicit PostgresUnderTest(std::string conninfo) : conninfo_(std::move(conninfo)) {}
  absl::StatusOr<std::unique_ptr<TraceStore>> Open(TraceStoreOptions options) override {
    auto store = PostgresTraceStore::Open(conninfo_, std::move(options));
    if (!store.ok()) return store.status();
    return std::unique_ptr<TraceStore>(std::move(*store));
  }
  bool persistent() const override { return true; }

 private:
  std::string conninfo_;
};

std::unique_ptr<StoreUnderTest> FreshDatabase() {
  if (Server() == nullptr) return nullptr;
  auto conninfo = Server()->CreateDatabase();
  if (!conninfo.ok()) {
    ADD_FAILURE() << conninfo.status() << "\n" << Server()->Log();
    return nullptr;
  }
  return std::make_unique<PostgresUnderTest>(*conninfo);
}

INSTANTIATE_TEST_SUITE_P(Stores, TraceStoreConformanceTest,
                         ::testing::Values(StoreKind{"Postgres", FreshDatabase}),
                         [](const ::testing::TestParamInfo<StoreKind>& info) {
                           return info.param.name;
                         });

absl::StatusOr<std::string> NewDatabase() { return Server()->CreateDatabase(); }

// Two server replicas on one database: uploads racing through both store
// each trace once, each replica reads the other's, tenants stay apart, and
// retention run by one replica is seen by the other even where it cached
// the trace.
TEST(PostgresTraceStoreTest, TwoReplicasShareOneDatabase) {
  REQUIRE_POSTGRES();
  auto conninfo = NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status();
  auto first = PostgresTraceStore::Open(*conninfo);
  auto second = PostgresTraceStore::Open(*conninfo);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  const std::vector<v1::Trace> traces = RealTraces(8);
  std::atomic<int> created{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      PostgresTraceStore& store = t % 2 == 0 ? **first : **second;
      for (size_t i = 0; i < traces.size(); ++i) {
        auto stored = store.Put("alpha", traces[(i + t) % traces.size()]);
        if (!stored.ok()) {
          ADD_FAILURE() << stored.status();
          ++failures;
        } else if (stored->created) {
          ++created;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(created.load(), static_cast<int>(traces.size()));

  std::vector<std::string> ids;
  for (const auto& trace : traces) {
    auto stored = (*first)->Put("alpha", trace);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_FALSE(stored->created);
    auto got = (*second)->Get("alpha", stored->id);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(SameTrace(**got, trace));
    EXPECT_EQ((*second)->Get("beta", stored->id).status(), TraceNotFoundError(stored->id));
    ids.push_back(stored->id);
  }
  EXPECT_EQ((*second)->Count().value_or(0), traces.size());

  ASSERT_EQ((*first)->DeleteOlderThan(absl::Now() + absl::Hours(1)).value_or(0), traces.size());
  for (const std::string& id : ids) {
    EXPECT_EQ((*second)->Get("alpha", id).status(), TraceNotFoundError(id));
  }
}

// PostgreSQL restarted under a running store: calls while it is down fail
// with UNAVAILABLE naming the server (no crash), and the store reconnects
// once it is back; what was committed before is still there.
TEST(PostgresTraceStoreTest, ReconnectsAfterTheServerRestarts) {
  REQUIRE_POSTGRES();
  auto conninfo = NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status();
  auto store = PostgresTraceStore::Open(*conninfo);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<v1::Trace> traces = RealTraces(2);
  auto before = (*store)->Put("", traces[0]);
  ASSERT_TRUE(before.ok()) << before.status();

  ASSERT_TRUE(Server()->Stop().ok());
  auto down = (*store)->Put("", traces[1]);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(down.status().message()),
              AllOf(HasSubstr("PostgreSQL trace store"), HasSubstr(Server()->socket_dir()),
                    HasSubstr("store a trace")));

  ASSERT_TRUE(Server()->Resume().ok()) << Server()->Log();
  auto after = (*store)->Put("", traces[1]);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->created);
  auto got = (*store)->Get("", before->id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(SameTrace(**got, traces[0]));
}

TEST(PostgresTraceStoreTest, ConnectionErrorsNameTheServerButNeverThePassword) {
  REQUIRE_POSTGRES();
  // Nothing listens on this socket directory.
  auto unreachable = PostgresTraceStore::Open(
      "host=/nonexistent/socket port=5999 dbname=habitat user=habitat password=sekrit-value "
      "connect_timeout=2");
  ASSERT_FALSE(unreachable.ok());
  EXPECT_EQ(unreachable.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(unreachable.status().message()),
              AllOf(HasSubstr("host=/nonexistent/socket"), HasSubstr("dbname=habitat"),
                    HasSubstr("connect"), Not(HasSubstr("sekrit"))));

  // The server is up but the database is not there.
  auto missing = PostgresTraceStore::Open(Server()->ConnInfo("no_such_database"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no_such_database"));

  auto unparsable = PostgresTraceStore::Open("host=db nonsense");
  ASSERT_FALSE(unparsable.ok());
  EXPECT_EQ(unparsable.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PostgresTraceStore::Open("").status().code(), absl::StatusCode::kInvalidArgument);
}

// What docs/operations.md promises: a role with only SELECT, INSERT and
// DELETE on a table an owner created can run the server; without the table
// and without CREATE it cannot, and says why.
TEST(PostgresTraceStoreTest, RunsWithALeastPrivilegeRoleOnceTheTableExists) {
  REQUIRE_POSTGRES();
  auto conninfo = NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status();
  auto run_as_owner = [&](const std::string& sql) {
    PGconn* conn = PQconnectdb(conninfo->c_str());
    PGresult* result = PQexec(conn, sql.c_str());
    EXPECT_EQ(PQresultStatus(result), PGRES_COMMAND_OK) << PQerrorMessage(conn);
    PQclear(result);
    PQfinish(conn);
  };
  run_as_owner("CREATE ROLE store_app LOGIN");
  const std::string as_app = *conninfo + " user=store_app";
  auto refused = PostgresTraceStore::Open(as_app);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              AllOf(HasSubstr("create the schema"), HasSubstr("permission denied")));

  ASSERT_TRUE(PostgresTraceStore::Open(*conninfo).ok());  // the owner creates it
  run_as_owner("GRANT SELECT, INSERT, DELETE ON habitat_traces TO store_app");
  auto store = PostgresTraceStore::Open(as_app);
  ASSERT_TRUE(store.ok()) << store.status();
  auto stored = (*store)->Put("alpha", RealTraces(1)[0]);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE((*store)->Get("alpha", stored->id).ok());
  EXPECT_EQ((*store)->Count().value_or(0), 1u);
  EXPECT_EQ((*store)->DeleteOlderThan(absl::Now() + absl::Hours(1)).value_or(0), 1u);
}

TEST(PostgresTraceStoreTest, FactoryOpensConnectionStringsAndUris) {
  REQUIRE_POSTGRES();
  auto conninfo = NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status();
  auto by_string = OpenTraceStore("postgres:" + *conninfo);
  ASSERT_TRUE(by_string.ok()) << by_string.status();
  EXPECT_THAT((*by_string)->Describe(), HasSubstr("postgres:host=" + Server()->socket_dir()));
  auto stored = (*by_string)->Put("", RealTraces(1)[0]);
  ASSERT_TRUE(stored.ok()) << stored.status();

  // The same database by URI (socket directory as the host parameter).
  const std::string dbname = conninfo->substr(conninfo->rfind('=') + 1);
  auto by_uri =
      OpenTraceStore(absl::StrCat("postgresql:///", dbname, "?host=", Server()->socket_dir(),
                                  "&port=", Server()->port(), "&user=habitat"));
  ASSERT_TRUE(by_uri.ok()) << by_uri.status();
  EXPECT_TRUE((*by_uri)->Get("", stored->id).ok());
}

}  // namespace
}  // namespace habitat::testing
