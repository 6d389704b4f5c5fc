#include "common/resource_dirs.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace habitat {
namespace {

namespace fs = std::filesystem;

TEST(ResourceDirsTest, ProgramInItsBuildDirectoryUsesTheSourceTree) {
  EXPECT_EQ(ResourceDirFor("/b/client", "/b/client", "/src/data", "../share/habitat/data"),
            "/src/data");
}

TEST(ResourceDirsTest, InstalledProgramUsesTheDirectoryBesideIt) {
  EXPECT_EQ(ResourceDirFor("/opt/habitat/bin", "/b/client", "/src/data", "../share/habitat/data"),
            "/opt/habitat/share/habitat/data");
  EXPECT_EQ(ResourceDirFor("/usr/bin", "/b/server", "/src/models", "../share/habitat/models/"),
            "/usr/share/habitat/models");
}

TEST(ResourceDirsTest, InstallUnderTheBuildTreeIsStillAnInstall) {
  // Only the very directory the build wrote the program to means "build tree".
  EXPECT_EQ(ResourceDirFor("/b/prefix/bin", "/b", "/src/data", "../share/habitat/data"),
            "/b/prefix/share/habitat/data");
}

TEST(ResourceDirsTest, UnknownProgramDirectoryUsesTheSourceTree) {
  EXPECT_EQ(ResourceDirFor("", "/b/client", "/src/data", "../share/habitat/data"), "/src/data");
}

TEST(ResourceDirsTest, BuildDirectoryReachedThroughALinkIsTheSame) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path base =
      fs::path(tmp ? tmp : "/tmp") / ("habitat_resource_dirs_" + std::to_string(getpid()));
  fs::create_directories(base / "real");
  fs::create_directory_symlink(base / "real", base / "link");
  EXPECT_EQ(ResourceDirFor((base / "real").string(), (base / "link").string(), "/src/data",
                           "../share/habitat/data"),
            "/src/data");
  fs::remove_all(base);
}

TEST(ResourceDirsTest, ProgramDirectoryIsThisTestsDirectory) {
  const std::string dir = ProgramDirectory();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::exists(fs::path(dir) / "common_test"));
}

}  // namespace
}  // namespace habitat
