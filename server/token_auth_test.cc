#include "server/token_auth.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTokenA[] = "tok-a-0123456789abcdef";
constexpr char kTokenB[] = "tok-b-fedcba9876543210";

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", getpid(), "_", name);
  std::ofstream(path) << text;
  return path;
}

ClientMetadata Bearer(const std::string& value) {
  ClientMetadata metadata;
  // string_ref does not own: the caller keeps `value` alive.
  metadata.emplace("authorization", grpc::string_ref(value));
  return metadata;
}

TEST(TokenTableTest, ParsesTenantsCommentsAndSeveralTokensPerTenant) {
  auto table = TokenTable::Parse(
      absl::StrCat("# production tokens\n\n  alpha ", kTokenA, "  # rotated 2026-11\r\n", "alpha\t",
                   kTokenB, "\nbeta.team-2 0123456789abcdef0123\n"),
      "tokens.txt");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 3u);
  ASSERT_NE(table->Find(kTokenA), nullptr);
  EXPECT_EQ(*table->Find(kTokenA), "alpha");
  EXPECT_EQ(*table->Find(kTokenB), "alpha");
  EXPECT_EQ(*table->Find("0123456789abcdef0123"), "beta.team-2");
  EXPECT_EQ(table->Find("0123456789abcdef012"), nullptr);
}

TEST(TokenTableTest, RejectsBadLinesWithLineNumbersAndNeverEchoesTokens) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::string secret = "s3cret-s3cret-s3cret";
  const Case cases[] = {
      {absl::StrCat("a ", kTokenA, "\nb ", kTokenA, "\n"),
       "line 2: the token of tenant 'b' duplicates the token on line 1"},
      {"a short-token\n", "line 1: the token of tenant 'a' is 11 characters"},
      {absl::StrCat("# x\na ", secret, " extra\n"), "line 2: expected `tenant token`, found 3"},
      {absl::StrCat(secret, "\n"), "line 1: expected `tenant token`, found 1"},
      {absl::StrCat("../etc ", secret, "\n"), "line 1: the tenant name must be"},
      {absl::StrCat(".hidden ", secret, "\n"), "line 1: the tenant name must be"},
      {absl::StrCat("a ", secret, "\xc3\xa9\n"), "outside visible ASCII"},
      {"# only comments\n\n", "holds no tokens"},
      {"", "holds no tokens"},
  };
  for (const auto& c : cases) {
    auto table = TokenTable::Parse(c.text, "t.txt");
    ASSERT_FALSE(table.ok()) << c.text;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(table.status().message()), HasSubstr(c.expected)) << c.text;
    EXPECT_THAT(std::string(table.status().message()), HasSubstr("token file 't.txt'"));
    EXPECT_THAT(std::string(table.status().message()), Not(HasSubstr(secret)));
    EXPECT_THAT(std::string(table.status().message()), Not(HasSubstr(kTokenA)));
  }
}

TEST(TokenTableTest, MissingFileIsNamed) {
  auto table = TokenTable::LoadFile("/nonexistent/tokens.txt");
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(std::string(table.status().message()), HasSubstr("/nonexistent/tokens.txt"));
}

TEST(AuthenticatorTest, DisabledAdmitsEveryCallAsAnonymous) {
  Authenticator off;
  EXPECT_FALSE(off.enabled());
  auto tenant = off.Authenticate(ClientMetadata());
  ASSERT_TRUE(tenant.ok());
  EXPECT_EQ(*tenant, "");
}

TEST(AuthenticatorTest, ChecksTheBearerHeader) {
  const std::string path = WriteTemp("auth_tokens.txt", absl::StrCat("alpha ", kTokenA, "\n"));
  auto auth = Authenticator::FromTokenFile(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  const std::string good = absl::StrCat("Bearer ", kTokenA);
  const std::string lower = absl::StrCat("bearer  ", kTokenA, " ");
  auto tenant = (*auth)->Authenticate(Bearer(good));
  ASSERT_TRUE(tenant.ok()) << tenant.status();
  EXPECT_EQ(*tenant, "alpha");
  ASSERT_TRUE((*auth)->Authenticate(Bearer(lower)).ok());

  struct Case {
    ClientMetadata metadata;
    std::string expected;
  };
  const std::string wrong = absl::StrCat("Bearer ", kTokenB);
  const std::string basic = "Basic YWxhZGRpbjpvcGVuc2VzYW1l";
  const std::string bare = kTokenA;
  ClientMetadata twice = Bearer(good);
  twice.emplace("authorization", grpc::string_ref(good));
  const Case cases[] = {
      {ClientMetadata(), "missing `authorization: Bearer <token>`"},
      {Bearer(wrong), "not valid on this server"},
      {Bearer(basic), "not of the form `Bearer <token>`"},
      {Bearer(bare), "not of the form `Bearer <token>`"},
      {Bearer("Bearer "), "not of the form `Bearer <token>`"},
      {twice, "more than one `authorization`"},
  };
  for (const auto& c : cases) {
    auto result = (*auth)->Authenticate(c.metadata);
    ASSERT_FALSE(result.ok()) << c.expected;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(c.expected));
    EXPECT_THAT(std::string(result.status().message()), Not(HasSubstr(kTokenB)));
  }
}

TEST(AuthenticatorTest, ReloadSwapsTokensAndKeepsOldOnesOnError) {
  const std::string path = WriteTemp("reload_tokens.txt", absl::StrCat("alpha ", kTokenA, "\n"));
  auto auth = Authenticator::FromTokenFile(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  const std::string a = absl::StrCat("Bearer ", kTokenA);
  const std::string b = absl::StrCat("Bearer ", kTokenB);
  EXPECT_FALSE((*auth)->Authenticate(Bearer(b)).ok());

  // Rotation: beta added, alpha's token retired.
  WriteTemp("reload_tokens.txt", absl::StrCat("beta ", kTokenB, "\n"));
  auto count = (*auth)->Reload();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 1u);
  EXPECT_EQ(*(*auth)->Authenticate(Bearer(b)), "beta");
  EXPECT_FALSE((*auth)->Authenticate(Bearer(a)).ok());

  // A broken file (duplicate) is refused; beta stays valid.
  WriteTemp("reload_tokens.txt", absl::StrCat("beta ", kTokenB, "\ngamma ", kTokenB, "\n"));
  auto failed = (*auth)->Reload();
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("line 2"));
  EXPECT_EQ(*(*auth)->Authenticate(Bearer(b)), "beta");
  EXPECT_EQ((*auth)->token_count(), 1u);

  std::remove(path.c_str());
  EXPECT_FALSE((*auth)->Reload().ok());
  EXPECT_EQ(*(*auth)->Authenticate(Bearer(b)), "beta");
}

}  // namespace
}  // namespace habitat
