// The conformance suite on the memory and directory stores, and what is
// particular to the directory store. The SQL stores run it beside their own
// tests (server/persistence/).
#include "core/store/trace_store.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "core/store/trace_store_conformance.h"
#include "gtest/gtest.h"

namespace habitat::testing {
namespace {

class MemoryUnderTest : public StoreUnderTest {
 public:
  absl::StatusOr<std::unique_ptr<TraceStore>> Open(TraceStoreOptions options) override {
    return std::make_unique<InMemoryTraceStore>(std::move(options));
  }
  bool persistent() const override { return false; }
};

class DirectoryUnderTest : public StoreUnderTest {
 public:
  absl::StatusOr<std::unique_ptr<TraceStore>> Open(TraceStoreOptions options) override {
    auto store = DirectoryTraceStore::Open(dir_.path() + "/traces", std::move(options));
    if (!store.ok()) return store.status();
    return std::unique_ptr<TraceStore>(std::move(*store));
  }
  bool persistent() const override { return true; }

 private:
  ScratchDir dir_;
};

INSTANTIATE_TEST_SUITE_P(
    Stores, TraceStoreConformanceTest,
    ::testing::Values(StoreKind{"Memory", [] { return std::make_unique<MemoryUnderTest>(); }},
                      StoreKind{"Directory",
                                [] { return std::make_unique<DirectoryUnderTest>(); }}),
    [](const ::testing::TestParamInfo<StoreKind>& info) { return info.param.name; });

TEST(DirectoryTraceStoreTest, KeepsTenantsInTheirOwnDirectories) {
  ScratchDir dir;
  auto store = DirectoryTraceStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  auto stored = (*store)->Put("alpha", RealTraces(1)[0]);
  ASSERT_TRUE(stored.ok()) << stored.status();
  const std::string hex = stored->id.substr(7);
  struct stat info;
  EXPECT_EQ(::stat((dir.path() + "/tenants/alpha/" + hex + ".trace").c_str(), &info), 0);
  EXPECT_NE(::stat((dir.path() + "/" + hex + ".trace").c_str(), &info), 0);
}

TEST(DirectoryTraceStoreTest, ReportsCorruptFiles) {
  ScratchDir dir;
  auto store = DirectoryTraceStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  const std::string id = "sha256:" + std::string(64, 'a');
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/" + std::string(64, 'a') + ".trace",
                                  "\xff\xff\xff garbage")
                  .ok());
  EXPECT_EQ((*store)->Get("", id).status().code(), absl::StatusCode::kDataLoss);
}

// A server killed mid-write leaves NAME.trace.PID.tmp, a whole trace
// outside the quota. Opening the store deletes those of dead writers and of
// its own PID (a restarted container's server often has the same PID), and
// keeps a live process's in-flight file and anything else.
TEST(DirectoryTraceStoreTest, OpenDeletesTemporaryFilesOfDeadWriters) {
  ScratchDir dir;
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const std::string hex(64, 'b');
  const std::string tenant_dir = dir.path() + "/tenants/alpha";
  ASSERT_EQ(::mkdir((dir.path() + "/tenants").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(tenant_dir.c_str(), 0755), 0);
  const std::string own = absl::StrCat(dir.path(), "/", hex, ".trace.", ::getpid(), ".tmp");
  const std::string orphan = absl::StrCat(tenant_dir, "/", hex, ".trace.", dead, ".tmp");
  const std::string live = absl::StrCat(dir.path(), "/", hex, ".trace.", ::getppid(), ".tmp");
  const std::string other = dir.path() + "/notes.tmp";
  for (const std::string& path : {own, orphan, live, other}) {
    ASSERT_TRUE(WriteFileAtomically(path, "partial").ok()) << path;
  }
  ASSERT_TRUE(DirectoryTraceStore::Open(dir.path()).ok());
  struct stat info;
  EXPECT_NE(::stat(own.c_str(), &info), 0);
  EXPECT_NE(::stat(orphan.c_str(), &info), 0);
  EXPECT_EQ(::stat(live.c_str(), &info), 0);
  EXPECT_EQ(::stat(other.c_str(), &info), 0);
}

TEST(DirectoryTraceStoreTest, RefusesAPathThatIsAFile) {
  ScratchDir dir;
  const std::string file = dir.path() + "/file";
  ASSERT_TRUE(WriteFileAtomically(file, "x").ok());
  auto store = DirectoryTraceStore::Open(file);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(file), std::string::npos) << store.status();
}

}  // namespace
}  // namespace habitat::testing
