#include "common/program_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_FLAG(std::string, token_file, "", "a flag with an underscore");
ABSL_FLAG(bool, tls, false, "a bool flag");

namespace habitat {
namespace {

TEST(ProgramFlagsTest, FlagNamesTakeDashesForUnderscores) {
  EXPECT_EQ(UnderscoreFlagName("--token-file=/a-b"), "--token_file=/a-b");
  EXPECT_EQ(UnderscoreFlagName("-token-file"), "-token_file");
  EXPECT_EQ(UnderscoreFlagName("--token_file=x"), "--token_file=x");
  EXPECT_EQ(UnderscoreFlagName("--no-tls"), "--notls");
  // Not a flag's name: a value or a positional argument stays as it is.
  EXPECT_EQ(UnderscoreFlagName("-x-y"), "-x-y");
  EXPECT_EQ(UnderscoreFlagName("token-file"), "token-file");
  EXPECT_EQ(UnderscoreFlagName("--unknown-flag"), "--unknown-flag");
}

TEST(ProgramFlagsTest, ParsesDashedFlagsAndKeepsPositionals) {
  std::vector<std::string> words = {"prog",  "--token-file", "/tmp/a-b",    "--tls",
                                    "pos-1", "--",           "--token-file"};
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::vector<char*> positional = ParseProgramFlags(static_cast<int>(words.size()), argv.data());
  EXPECT_EQ(absl::GetFlag(FLAGS_token_file), "/tmp/a-b");
  EXPECT_TRUE(absl::GetFlag(FLAGS_tls));
  ASSERT_EQ(positional.size(), 3u);
  EXPECT_STREQ(positional[0], "prog");
  EXPECT_STREQ(positional[1], "pos-1");
  EXPECT_STREQ(positional[2], "--token-file");  // after "--": not a flag
}

}  // namespace
}  // namespace habitat
