// Files the tests share: a scratch directory removed with everything in
// it, directory listings and whole-file reads.
#pragma once

#include <string>
#include <vector>

namespace habitat::testing {

// A fresh directory under TEST_TMPDIR or /tmp; removed (recursively) on
// destruction. (Named apart from gtest's ::testing::TempDir(), the
// directory it lives in.)
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// File names in `dir` ending in `suffix`, sorted; empty if `dir` is missing.
std::vector<std::string> FilesWithSuffix(const std::string& dir, const std::string& suffix);

// The file's bytes; "" when it cannot be read.
std::string ReadWholeFile(const std::string& path);

}  // namespace habitat::testing
