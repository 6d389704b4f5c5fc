#include "server/persistence/trace_store_factory.h"

#include <map>

#include "core/store/trace_store_conformance.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat::testing {
namespace {

using ::testing::HasSubstr;

TEST(TraceStoreFactoryTest, ParsesEachForm) {
  using Kind = StoreSpec::Kind;
  const std::pair<std::string, StoreSpec> cases[] = {
      {"memory", {Kind::kMemory, ""}},
      {"dir:/var/lib/habitat/traces", {Kind::kDirectory, "/var/lib/habitat/traces"}},
      {"sqlite:/var/lib/habitat/traces.db", {Kind::kSqlite, "/var/lib/habitat/traces.db"}},
      {"sqlite:relative.db", {Kind::kSqlite, "relative.db"}},
      {"postgres:host=db dbname=habitat", {Kind::kPostgres, "host=db dbname=habitat"}},
      {"postgresql://habitat@db:5432/habitat",
       {Kind::kPostgres, "postgresql://habitat@db:5432/habitat"}},
      {"postgres://db/habitat", {Kind::kPostgres, "postgres://db/habitat"}},
  };
  for (const auto& [text, want] : cases) {
    auto spec = ParseStoreSpec(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_EQ(spec->kind, want.kind) << text;
    EXPECT_EQ(spec->location, want.location) << text;
  }
}

TEST(TraceStoreFactoryTest, RejectsUnknownAndEmptySpecs) {
  for (const std::string bad :
       {"", "sqlite:", "dir:", "postgres:", "mysql:x", "/tmp/x.db", "Memory"}) {
    auto spec = ParseStoreSpec(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr("'" + bad + "'"));
  }
}

TEST(TraceStoreFactoryTest, DescriptionsNeverShowAPassword) {
  EXPECT_EQ(DescribeStoreSpec("sqlite:/var/lib/habitat/traces.db"),
            "sqlite:/var/lib/habitat/traces.db");
  EXPECT_EQ(DescribeStoreSpec("postgres:host=db port=5433 dbname=habitat user=h password=pw1"),
            "postgres:host=db port=5433 dbname=habitat user=h");
  EXPECT_EQ(DescribeStoreSpec("postgresql://h:pw2@db:5433/habitat"),
            "postgres:host=db port=5433 dbname=habitat user=h");
}

TEST(TraceStoreFactoryTest, OpensTheNamedStore) {
  ScratchDir dir;
  auto sqlite = OpenTraceStore("sqlite:" + dir.path() + "/a/b/traces.db");
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  EXPECT_EQ((*sqlite)->Describe(), "sqlite:" + dir.path() + "/a/b/traces.db");
  auto directory = OpenTraceStore("dir:" + dir.path() + "/traces");
  ASSERT_TRUE(directory.ok()) << directory.status();
  EXPECT_EQ((*directory)->Describe(), "dir:" + dir.path() + "/traces");
  auto memory = OpenTraceStore("memory");
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ((*memory)->Describe(), "memory");
  const auto trace = RealTraces(1)[0];
  for (TraceStore* store : {sqlite->get(), directory->get(), memory->get()}) {
    auto stored = store->Put("", trace);
    ASSERT_TRUE(stored.ok()) << store->Describe() << ": " << stored.status();
    EXPECT_TRUE(store->Get("", stored->id).ok()) << store->Describe();
  }
}

TEST(TraceStoreFactoryTest, DefaultSqlitePathFollowsTheEnvironment) {
  auto with = [](std::map<std::string, std::string> env) {
    return DefaultSqlitePath([env](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  EXPECT_EQ(with({{"STATE_DIRECTORY", "/var/lib/habitat:/var/lib/other"},
                  {"XDG_STATE_HOME", "/x"},
                  {"HOME", "/home/u"}}),
            "/var/lib/habitat/traces.db");
  EXPECT_EQ(with({{"XDG_STATE_HOME", "/x/state"}, {"HOME", "/home/u"}}),
            "/x/state/habitat/traces.db");
  EXPECT_EQ(with({{"XDG_STATE_HOME", "relative"}, {"HOME", "/home/u"}}),
            "/home/u/.local/state/habitat/traces.db");
  EXPECT_EQ(with({{"HOME", "/"}}), "/var/lib/habitat/traces.db");
  EXPECT_EQ(with({}), "/var/lib/habitat/traces.db");
}

}  // namespace
}  // namespace habitat::testing
