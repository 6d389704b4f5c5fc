// The conformance suite on the SQLite store, and what is particular to it:
// the file's format, errors that name the file, and two stores (two server
// processes) on one file.
#include "server/persistence/sqlite_trace_store.h"

#include <sqlite3.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "core/store/trace_store_conformance.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class SqliteUnderTest : public StoreUnderTest {
 public:
  absl::StatusOr<std::unique_ptr<TraceStore>> Open(TraceStoreOptions options) override {
    auto store = SqliteTraceStore::Open(dir_.path() + "/state/traces.db", std::move(options));
    if (!store.ok()) return store.status();
    return std::unique_ptr<TraceStore>(std::move(*store));
  }
  bool persistent() const override { return true; }

 private:
  ScratchDir dir_;
};

INSTANTIATE_TEST_SUITE_P(
    Stores, TraceStoreConformanceTest,
    ::testing::Values(StoreKind{"Sqlite", [] { return std::make_unique<SqliteUnderTest>(); }}),
    [](const ::testing::TestParamInfo<StoreKind>& info) { return info.param.name; });

// Runs SQL on the file through SQLite directly, as an operator would with
// the sqlite3 shell; the first column of each row, as text.
std::vector<std::string> RawQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::string> rows;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(
      db, sql.c_str(),
      [](void* out, int, char** values, char**) {
        static_cast<std::vector<std::string>*>(out)->push_back(values[0] ? values[0] : "NULL");
        return 0;
      },
      &rows, &error);
  EXPECT_EQ(rc, SQLITE_OK) << (error ? error : "") << " in " << sql;
  sqlite3_free(error);
  sqlite3_close(db);
  return rows;
}

TEST(SqliteTraceStoreTest, WritesTheDocumentedSchemaInWalMode) {
  ScratchDir dir;
  const std::string path = dir.path() + "/traces.db";
  FakeClock clock(absl::FromUnixSeconds(1'750'000'000));
  TraceStoreOptions options;
  options.clock = clock.AsClock();
  auto store = SqliteTraceStore::Open(path, options);
  ASSERT_TRUE(store.ok()) << store.status();
  const v1::Trace trace = RealTraces(1)[0];
  auto stored = (*store)->Put("alpha", trace);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ((*store)->Describe(), "sqlite:" + path);

  EXPECT_THAT(RawQuery(path, "PRAGMA journal_mode"), ::testing::ElementsAre("wal"));
  EXPECT_THAT(RawQuery(path, "PRAGMA user_version"), ::testing::ElementsAre("1"));
  EXPECT_THAT(RawQuery(path,
                       "SELECT tenant || ' ' || id || ' ' || size_bytes || ' ' || "
                       "created_at FROM habitat_traces"),
              ::testing::ElementsAre(absl::StrCat("alpha ", stored->id, " ", trace.ByteSizeLong(),
                                                  " ", absl::ToUnixNanos(clock.Now()))));
  // The blob is the gzip of the serialised trace, and smaller than it.
  EXPECT_THAT(RawQuery(path, "SELECT hex(substr(data, 1, 2)) FROM habitat_traces"),
              ::testing::ElementsAre("1F8B"));
  const auto length = RawQuery(path, "SELECT length(data) FROM habitat_traces");
  ASSERT_EQ(length.size(), 1u);
  EXPECT_LT(std::stoul(length[0]), trace.ByteSizeLong());
}

TEST(SqliteTraceStoreTest, ErrorsNameTheFileAndWhatFailed) {
  ScratchDir dir;
  EXPECT_EQ(SqliteTraceStore::Open("").status().code(), absl::StatusCode::kInvalidArgument);

  // A parent that is a file.
  const std::string file = dir.path() + "/plain";
  ASSERT_TRUE(WriteFileAtomically(file, "not a directory").ok());
  auto under_file = SqliteTraceStore::Open(file + "/traces.db");
  ASSERT_FALSE(under_file.ok());
  EXPECT_THAT(std::string(under_file.status().message()),
              AllOf(HasSubstr(file + "/traces.db"), HasSubstr("cannot create directory")));

  // A directory where the file should be.
  auto directory = SqliteTraceStore::Open(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_THAT(std::string(directory.status().message()),
              AllOf(HasSubstr("'" + dir.path() + "'"), HasSubstr("open the database file")));

  // A file that is not a SQLite database.
  const std::string junk = dir.path() + "/junk.db";
  ASSERT_TRUE(WriteFileAtomically(junk, std::string(4096, 'x')).ok());
  auto not_db = SqliteTraceStore::Open(junk);
  ASSERT_FALSE(not_db.ok());
  EXPECT_EQ(not_db.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(not_db.status().message()),
              AllOf(HasSubstr(junk), HasSubstr("set WAL mode"), HasSubstr("not a database")));
}

TEST(SqliteTraceStoreTest, RefusesAFileFromANewerSchema) {
  ScratchDir dir;
  const std::string path = dir.path() + "/traces.db";
  ASSERT_TRUE(SqliteTraceStore::Open(path).ok());
  RawQuery(path, "PRAGMA user_version = 2");
  auto store = SqliteTraceStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()),
              AllOf(HasSubstr(path), HasSubstr("schema version 2")));
}

TEST(SqliteTraceStoreTest, RefusesAnExistingEmptyFileAndKeepsIt) {
  ScratchDir dir;
  const std::string path = dir.path() + "/traces.db";
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  auto store = SqliteTraceStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()),
              AllOf(HasSubstr(path), HasSubstr("exists but is empty"),
                    HasSubstr("remove the file to start a new")));
  auto bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "") << "the refused file is left as it was";
  ASSERT_EQ(::remove(path.c_str()), 0);
  EXPECT_TRUE(SqliteTraceStore::Open(path).ok()) << "a missing file is a new store";
}

TEST(SqliteTraceStoreTest, RefusesAnotherApplicationsDatabase) {
  ScratchDir dir;
  const std::string path = dir.path() + "/other.db";
  RawQuery(path, "CREATE TABLE accounts (id INTEGER)");
  auto store = SqliteTraceStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()),
              AllOf(HasSubstr(path), HasSubstr("1 table(s) but no habitat schema")));
  EXPECT_EQ(RawQuery(path, "SELECT count(*) FROM sqlite_master WHERE name = 'habitat_traces'"),
            std::vector<std::string>{"0"});
}

TEST(SqliteTraceStoreTest, DamagedRowsAreDataLossNamingTheTrace) {
  ScratchDir dir;
  const std::string path = dir.path() + "/traces.db";
  const std::vector<v1::Trace> traces = RealTraces(2);
  std::string garbled, resized;
  {
    auto store = SqliteTraceStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    garbled = (*store)->Put("", traces[0])->id;
    resized = (*store)->Put("", traces[1])->id;
  }
  RawQuery(path, "UPDATE habitat_traces SET data = x'1f8b0000' WHERE id = '" + garbled + "'");
  RawQuery(path, "UPDATE habitat_traces SET size_bytes = 7 WHERE id = '" + resized + "'");
  auto store = SqliteTraceStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  for (const std::string& id : {garbled, resized}) {
    auto got = (*store)->Get("", id);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(got.status().message()), AllOf(HasSubstr(id), HasSubstr(path)));
  }
}

// Two servers on one file (e.g. during a rolling restart): SQLite's locks
// keep PutIfAbsent exact, and each sees what the other stored.
TEST(SqliteTraceStoreTest, TwoStoresOnOneFileStoreEachTraceOnce) {
  ScratchDir dir;
  const std::string path = dir.path() + "/traces.db";
  auto first = SqliteTraceStore::Open(path);
  auto second = SqliteTraceStore::Open(path);
  ASSERT_TRUE(first.ok() && second.ok());
  const std::vector<v1::Trace> traces = RealTraces(8);
  std::atomic<int> created{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      SqliteTraceStore& store = t % 2 == 0 ? **first : **second;
      for (const auto& trace : traces) {
        auto stored = store.Put("", trace);
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
  for (const auto& trace : traces) {
    auto id = (*first)->Put("", trace);
    ASSERT_TRUE(id.ok());
    EXPECT_TRUE((*second)->Get("", id->id).ok());
  }
  // Retention through one store is seen by the other, whose cache has it.
  ASSERT_EQ((*second)->DeleteOlderThan(absl::Now() + absl::Hours(1)).value_or(0), traces.size());
  const std::string id = (*first)->Put("x", traces[0])->id;
  ASSERT_TRUE((*first)->Get("x", id).ok());
  ASSERT_EQ((*second)->DeleteOlderThan(absl::Now() + absl::Hours(1)).value_or(0), 1u);
  EXPECT_EQ((*first)->Get("x", id).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace habitat::testing
