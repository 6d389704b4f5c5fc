#include "client/cli_args.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<OptionSpec> kSpecs = {
    {"server", true}, {"format", true}, {"spot", false}, {"devices", true}, {"top", true}};

TEST(CliArgsTest, ParsesValuesSwitchesAndPositionals) {
  auto args = CliArgs::Parse({"trace.pb", "--server", "h:1", "--format=json", "--spot"}, kSpecs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(args->positional(), ElementsAre("trace.pb"));
  EXPECT_EQ(args->Get("server"), "h:1");
  EXPECT_EQ(args->Get("format"), "json");
  EXPECT_TRUE(args->Has("spot"));
  EXPECT_FALSE(args->Has("devices"));
  EXPECT_EQ(args->Get("devices", "all"), "all");
}

TEST(CliArgsTest, ShortFormsOfSwitches) {
  const std::vector<OptionSpec> specs = {{"quiet", false, 'q'}, {"spot", false}};
  auto args = CliArgs::Parse({"trace.pb", "-q"}, specs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_TRUE(args->Has("quiet"));
  EXPECT_THAT(args->positional(), ElementsAre("trace.pb"));
  EXPECT_THAT(std::string(CliArgs::Parse({"-q", "--quiet"}, specs).status().message()),
              HasSubstr("given twice"));
  // Only the letters a spec names; after "--" a word is positional.
  EXPECT_THAT(std::string(CliArgs::Parse({"-s"}, specs).status().message()),
              HasSubstr("unknown option '-s'"));
  auto after = CliArgs::Parse({"--", "-q"}, specs);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->Has("quiet"));
  EXPECT_THAT(after->positional(), ElementsAre("-q"));
}

TEST(CliArgsTest, DoubleDashEndsOptions) {
  auto args = CliArgs::Parse({"--spot", "--", "--weird-file-name"}, kSpecs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(args->positional(), ElementsAre("--weird-file-name"));
}

TEST(CliArgsTest, UnknownOptionsSuggestTheClosestKnownOne) {
  auto message = [](std::vector<std::string> words) {
    return std::string(CliArgs::Parse(words, kSpecs).status().message());
  };
  EXPECT_THAT(message({"--servr", "h:1"}), HasSubstr("(did you mean '--server'?)"));
  EXPECT_THAT(message({"--formt=json"}), HasSubstr("(did you mean '--format'?)"));
  EXPECT_THAT(message({"--dev", "T4"}), HasSubstr("(did you mean '--devices'?)"));  // a prefix
  EXPECT_THAT(message({"--colour"}), Not(HasSubstr("did you mean")));               // nothing close
}

TEST(CliArgsTest, DashHIsHelp) {
  std::vector<OptionSpec> specs = kSpecs;
  specs.push_back({"help", false});
  auto args = CliArgs::Parse({"-h"}, specs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_TRUE(args->Has("help"));
  // After "--" it is a file name like any other.
  args = CliArgs::Parse({"--", "-h"}, specs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(args->positional(), ElementsAre("-h"));
}

TEST(CliArgsTest, RejectsUnknownMissingRepeatedAndMisusedOptions) {
  EXPECT_THAT(CliArgs::Parse({"--nope"}, kSpecs).status().message(),
              HasSubstr("unknown option '--nope'"));
  EXPECT_THAT(CliArgs::Parse({"-x"}, kSpecs).status().message(), HasSubstr("unknown option"));
  EXPECT_THAT(CliArgs::Parse({"--server"}, kSpecs).status().message(),
              HasSubstr("'--server' needs a value"));
  EXPECT_THAT(CliArgs::Parse({"--spot=yes"}, kSpecs).status().message(),
              HasSubstr("takes no value"));
  EXPECT_THAT(CliArgs::Parse({"--spot", "--spot"}, kSpecs).status().message(),
              HasSubstr("given twice"));
}

TEST(CliArgsTest, IntegersAreRangeChecked) {
  auto args = CliArgs::Parse({"--top", "12"}, kSpecs);
  ASSERT_TRUE(args.ok());
  auto top = args->GetInt("top", 1, 100);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->value(), 12);
  EXPECT_FALSE(args->GetInt("format", 1, 100)->has_value());  // absent
  EXPECT_THAT(args->GetInt("top", 1, 10).status().message(), HasSubstr("--top must be"));
  auto bad = CliArgs::Parse({"--top", "12x"}, kSpecs);
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->GetInt("top", 1, 100).ok());
}

TEST(CliArgsTest, ListsRejectEmptyItems) {
  auto args = CliArgs::Parse({"--devices", "A100,,H100"}, kSpecs);
  ASSERT_TRUE(args.ok());
  EXPECT_THAT(args->GetList("devices").status().message(), HasSubstr("empty item"));
  auto good = CliArgs::Parse({"--devices", "A100,H100"}, kSpecs);
  ASSERT_TRUE(good.ok());
  EXPECT_THAT(*good->GetList("devices"), ElementsAre("A100", "H100"));
}

}  // namespace
}  // namespace habitat
