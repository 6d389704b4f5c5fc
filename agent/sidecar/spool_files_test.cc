// The spool's file handling on a real directory: what counts as a trace,
// durable writes, receipts and rejected/.
#include "agent/sidecar/spool_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "absl/time/clock.h"
#include "agent/sidecar/spool_test_support.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/files.h"

namespace habitat::agent {
namespace {

using ::habitat::agent::testing::WriteSpoolBytes;
using ::habitat::testing::FilesWithSuffix;
using ::habitat::testing::ScratchDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Touch(const std::string& path, absl::Time when) {
  const timespec t = absl::ToTimespec(when);
  const timespec times[2] = {t, t};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

TEST(ListSpoolTest, TakesOnlyCompleteRegularTraceFilesOldestFirst) {
  ScratchDir dir;
  for (const char* name : {"b.trace", "a.trace", "c.trace.tmp", "a.trace.done", ".hidden.trace",
                           "x.json", "d.trace.123.tmp", ".trace"}) {
    WriteSpoolBytes(dir.path(), name, "x");
  }
  ASSERT_EQ(::mkdir(dir.Sub("dir.trace").c_str(), 0755), 0);
  ASSERT_EQ(::symlink(dir.Sub("b.trace").c_str(), dir.Sub("link.trace").c_str()), 0);
  const absl::Time now = absl::Now();
  Touch(dir.Sub("b.trace"), now - absl::Minutes(2));
  Touch(dir.Sub("a.trace"), now - absl::Minutes(1));

  auto entries = ListSpool(dir.path());
  ASSERT_TRUE(entries.ok()) << entries.status();
  std::vector<std::string> names;
  for (const auto& e : *entries) names.push_back(e.name);
  EXPECT_THAT(names, ElementsAre("b.trace", "a.trace"));
  EXPECT_EQ((*entries)[0].size, 1);
}

TEST(ListSpoolTest, MissingDirectoryIsAnErrorNamingIt) {
  auto entries = ListSpool("/nonexistent/spool");
  ASSERT_FALSE(entries.ok());
  EXPECT_THAT(entries.status().message(), HasSubstr("/nonexistent/spool"));
}

// The spool's writes go through the shared atomic writer, whose temporary
// ends in ".tmp" (swept at start-up, never taken for a trace).
TEST(SpoolFilesTest, WritesReplaceAtomicallyAndLeaveNoTemporary) {
  ScratchDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.Sub("r.done"), "one").ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Sub("r.done"), "two").ok());
  EXPECT_EQ(Slurp(dir.Sub("r.done")), "two");
  EXPECT_THAT(FilesWithSuffix(dir.path(), ".tmp"), ElementsAre());
  EXPECT_FALSE(WriteFileAtomically("/nonexistent/r.done", "x").ok());
}

TEST(SpoolFilesTest, ReadTellsAVanishedFileFromAnUnreadableOne) {
  ScratchDir dir;
  EXPECT_EQ(ReadSpoolFile(dir.Sub("gone.trace")).status().code(), absl::StatusCode::kNotFound);
  WriteSpoolBytes(dir.path(), "t.trace", "abc");
  auto read = ReadSpoolFile(dir.Sub("t.trace"));
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->bytes, "abc");
  EXPECT_TRUE(IsSameFile(dir.Sub("t.trace"), *read));
  // A new file renamed over the name is a different file.
  WriteSpoolBytes(dir.path(), "t.trace", "abc");
  EXPECT_FALSE(IsSameFile(dir.Sub("t.trace"), *read));
  // A symlink is refused, not followed.
  ASSERT_EQ(::symlink(dir.Sub("t.trace").c_str(), dir.Sub("l.trace").c_str()), 0);
  auto link = ReadSpoolFile(dir.Sub("l.trace"));
  EXPECT_EQ(link.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(link.status().message(), HasSubstr("l.trace"));
}

TEST(SpoolFilesTest, RemoveDurablyToleratesAMissingFile) {
  ScratchDir dir;
  WriteSpoolBytes(dir.path(), "t.trace", "abc");
  EXPECT_TRUE(RemoveDurably(dir.path(), "t.trace").ok());
  EXPECT_TRUE(RemoveDurably(dir.path(), "t.trace").ok());
  EXPECT_THAT(FilesWithSuffix(dir.path(), ".trace"), ElementsAre());
}

TEST(SpoolFilesTest, MoveToRejectedKeepsEarlierRejectsOfTheSameName) {
  ScratchDir dir;
  WriteSpoolBytes(dir.path(), "bad.trace", "first");
  auto first = MoveToRejected(dir.path(), "bad.trace", "reason one");
  ASSERT_TRUE(first.ok()) << first.status();
  WriteSpoolBytes(dir.path(), "bad.trace", "second");
  auto second = MoveToRejected(dir.path(), "bad.trace", "reason two");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*first, dir.Sub("rejected/bad.trace"));
  EXPECT_EQ(*second, dir.Sub("rejected/bad.trace.1"));
  EXPECT_EQ(Slurp(*first), "first");
  EXPECT_EQ(Slurp(*second), "second");
  EXPECT_EQ(Slurp(*first + ".reason"), "reason one");
  EXPECT_EQ(Slurp(*second + ".reason"), "reason two");
  EXPECT_THAT(FilesWithSuffix(dir.path(), ".trace"), ElementsAre());
}

TEST(ReceiptTest, RoundTripsAndNeedsATraceId) {
  Receipt receipt;
  receipt.trace_id = "sha256:" + std::string(64, 'a');
  receipt.created = true;
  receipt.uploaded_at = absl::FromUnixMillis(1700000000123);
  receipt.server = "127.0.0.1:50051";
  const std::string text = FormatReceipt(receipt);
  EXPECT_THAT(text, HasSubstr("uploaded_at=2023-11-14T22:13:20.123+00:00"));
  auto parsed = ParseReceipt(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->trace_id, receipt.trace_id);
  EXPECT_TRUE(parsed->created);
  EXPECT_EQ(parsed->uploaded_at, receipt.uploaded_at);
  EXPECT_EQ(parsed->server, receipt.server);

  EXPECT_EQ(ParseReceipt("created=true\n").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseReceipt("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ParseReceipt("trace_id=x\nuploaded_at=yesterday\n").status().message(),
              HasSubstr("uploaded_at"));
}

}  // namespace
}  // namespace habitat::agent
