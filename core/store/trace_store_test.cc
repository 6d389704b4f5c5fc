#include "core/store/trace_store.h"

#include <unistd.h>

#include <cstdlib>

#include "core/predict/test_fixtures.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

v1::Trace RealTrace() {
  auto trace = testing::LoadKinetoFixture("h100", "dcgan_b64_fp32", 64);
  EXPECT_TRUE(trace.ok()) << trace.status();
  return trace.ok() ? *trace : v1::Trace();
}

std::string TempDir() {
  char pattern[] = "/tmp/habitat_store_XXXXXX";
  return mkdtemp(pattern);
}

TEST(TraceStoreTest, InMemoryIsContentAddressed) {
  InMemoryTraceStore store;
  const v1::Trace trace = RealTrace();
  auto first = store.Put(trace);
  auto second = store.Put(trace);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE(first->created);
  EXPECT_FALSE(second->created);
  EXPECT_EQ(first->id, second->id);
  auto got = store.Get(first->id);
  ASSERT_TRUE(got.ok());
  // Map fields serialise in no fixed order: compare as messages.
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(**got, trace));
  EXPECT_EQ(store.Get("sha256:" + std::string(64, '0')).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TraceStoreTest, DirectoryStoreSurvivesReopen) {
  const std::string dir = TempDir();
  const v1::Trace trace = RealTrace();
  std::string id;
  {
    auto store = DirectoryTraceStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    auto put = (*store)->Put(trace);
    ASSERT_TRUE(put.ok()) << put.status();
    EXPECT_TRUE(put->created);
    id = put->id;
  }
  auto reopened = DirectoryTraceStore::Open(dir);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->size(), 1u);
  auto again = (*reopened)->Put(trace);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  auto got = (*reopened)->Get(id);
  ASSERT_TRUE(got.ok()) << got.status();
  // Map fields serialise in no fixed order: compare as messages.
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(**got, trace));
  EXPECT_EQ((*reopened)->Get("../../etc/passwd").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

TEST(TraceStoreTest, DirectoryStoreReportsCorruptFiles) {
  const std::string dir = TempDir();
  auto store = DirectoryTraceStore::Open(dir);
  ASSERT_TRUE(store.ok());
  const std::string id = "sha256:" + std::string(64, 'a');
  ASSERT_TRUE(WriteFileAtomically(dir + "/" + std::string(64, 'a') + ".trace",
                                  "\xff\xff\xff garbage").ok());
  EXPECT_EQ((*store)->Get(id).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace
}  // namespace habitat
