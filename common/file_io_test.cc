#include "common/file_io.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace habitat {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/habitat_file_io_" +
         std::to_string(getpid()) + "_" + name;
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

TEST(FileIoTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadFile("/nonexistent/habitat/file").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace habitat
