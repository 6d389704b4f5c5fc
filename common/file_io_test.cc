#include "common/file_io.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/habitat_file_io_" + std::to_string(getpid()) + "_" +
         name;
}

TEST(FileIoTest, WriteThenReadRoundTrips) {
  const std::string path = TempPath("plain");
  ASSERT_TRUE(WriteFileAtomically(path, std::string("a\0b", 3)).ok());
  auto read = ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, std::string("a\0b", 3));
  unlink(path.c_str());
}

TEST(FileIoTest, ReadInflatesGzipTransparently) {
  const std::string payload(100000, 'x');
  auto compressed = Gzip(payload);
  ASSERT_TRUE(compressed.ok());
  EXPECT_LT(compressed->size(), payload.size() / 10);
  const std::string path = TempPath("gz");
  ASSERT_TRUE(WriteFileAtomically(path, *compressed).ok());
  auto read = ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, payload);
  unlink(path.c_str());
}

TEST(FileIoTest, TruncatedGzipIsInvalidArgument) {
  auto compressed = Gzip(std::string(5000, 'y') + "tail");
  ASSERT_TRUE(compressed.ok());
  auto inflated = Gunzip(compressed->substr(0, compressed->size() / 2));
  EXPECT_EQ(inflated.status().code(), absl::StatusCode::kInvalidArgument);
}

// Bytes after the end of the gzip member (junk appended, a second member
// concatenated) used to be ignored: the file read as valid although part of
// it was never looked at. Refused, saying how many bytes follow.
TEST(FileIoTest, BytesAfterTheGzipMemberAreRefused) {
  const std::string payload = std::string(5000, 'y') + "tail";
  auto compressed = Gzip(payload);
  ASSERT_TRUE(compressed.ok());
  ASSERT_TRUE(Gunzip(*compressed).ok());
  for (const std::string& trailer :
       {std::string("junk"), std::string(1, '\0'), *compressed, std::string(100000, 'z')}) {
    auto inflated = Gunzip(*compressed + trailer);
    ASSERT_FALSE(inflated.ok()) << trailer.size();
    EXPECT_EQ(inflated.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(
        inflated.status().message(),
        absl::StrCat(trailer.size(), " bytes follow the end of the gzip data (", compressed->size(),
                     " bytes); a second gzip member or trailing bytes are not accepted"));
  }
  const std::string path = TempPath("gz_trailing");
  ASSERT_TRUE(WriteFileAtomically(path, *compressed + "junk").ok());
  auto read = ReadFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(read.status().message().find(path), absl::string_view::npos) << read.status();
  EXPECT_NE(read.status().message().find("4 bytes follow the end of the gzip data"),
            absl::string_view::npos)
      << read.status();
  unlink(path.c_str());
}

TEST(FileIoTest, GunzipStopsAtItsLimit) {
  const std::string zeros(3 << 20, '\0');
  auto compressed = Gzip(zeros);
  ASSERT_TRUE(compressed.ok());
  auto refused = Gunzip(*compressed, 1 << 20);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(), "inflates to more than 1048576 bytes");
  auto exact = Gunzip(*compressed, zeros.size());
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(*exact, zeros);

  const std::string path = TempPath("gz");
  ASSERT_TRUE(WriteFileAtomically(path, *compressed).ok());
  EXPECT_EQ(ReadFile(path, 1 << 20).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ReadFile(path).ok());
  unlink(path.c_str());
}

// A full disk is RESOURCE_EXHAUSTED, as the SQLite and PostgreSQL stores say
// it; it used to be UNAVAILABLE, which the sidecar reads as "server down".
// A file size limit gives the same kind of write error (EFBIG) as a full
// disk (ENOSPC) without needing one.
TEST(FileIoTest, OutOfSpaceIsResourceExhausted) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string path = TempPath("too_big");
  const absl::Status status = WriteFileAtomically(path, std::string(1 << 16, 'x'));
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find("out of space"), absl::string_view::npos) << status;
  EXPECT_NE(ReadFile(path).status().code(), absl::StatusCode::kOk) << "a partial file was left";
  EXPECT_EQ(ErrnoStatus(ENOSPC, "m").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoStatus(EIO, "m").code(), absl::StatusCode::kUnavailable);
}

TEST(FileIoTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadFile("/nonexistent/habitat/file").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace habitat
