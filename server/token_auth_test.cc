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
       "line 2: the token (second field) duplicates the token on line 1"},
      {"a short-token\n", "line 1: the token (second field) has 11 characters"},
      {absl::StrCat("# x\na ", secret, " extra\n"), "line 2: expected `tenant token`, found 3"},
      {absl::StrCat(secret, "\n"), "line 1: expected `tenant token`, found 1"},
      {absl::StrCat("../etc ", secret, "\n"), "line 1: the tenant (first field) must be"},
      {absl::StrCat(".hidden ", secret, "\n"), "line 1: the tenant (first field) must be"},
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

// A line with its two fields swapped: the secret in the tenant field, the
// tenant's name in the token field. Refused whatever the name's length, and
// neither field appears in the message.
TEST(TokenTableTest, RefusesSwappedFieldsWithoutEchoingEither) {
  const std::string hex64 = "9f2c4e7a1b3d5f6081a2c3e4f5061728394a5b6c7d8e9f001122334455667789";
  const std::string base64url = "q7ZfK2xP9mWb4Lr1TnV8sYc0Hd6JgE3uAaQiXoRkMzN";
  const std::string base64 = "Zx8+Qm3kT1pV7rW9yB2nC5dF0hJ4lL6sU/aE1gI8oK0=";
  const std::string long_name = "team-vision-production";  // 22 characters
  struct Case {
    std::string tenant;
    std::string token;
    std::string expected;
  };
  const Case cases[] = {
      // Short name: once "the token of tenant '<hex64>' is 5 characters".
      {hex64, "alpha", "line 1: the tenant (first field) looks like a token"},
      // 16+ characters: once loaded silently, the name a working token.
      {hex64, long_name, "line 1: the tenant (first field) looks like a token"},
      {hex64, "Team-Vision-2026-prod", "line 1: the tenant (first field) looks like a token"},
      {base64url, long_name, "line 1: the tenant (first field) looks like a token"},
      {base64url, "TeamVision2026Prod", "line 1: the tenant (first field) looks like a token"},
      {base64, long_name, "line 1: the tenant (first field) looks like a token"},
      {"0123456789ABCDEF", "scheduler-0123456789", "the tenant (first field) looks like a token"},
  };
  for (const auto& c : cases) {
    const std::string text = absl::StrCat(c.tenant, " ", c.token, "\n");
    auto table = TokenTable::Parse(text, "t.txt");
    ASSERT_FALSE(table.ok()) << text;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(table.status().message());
    EXPECT_THAT(message, HasSubstr(c.expected)) << text;
    EXPECT_THAT(message, HasSubstr("swapped")) << text;
    EXPECT_THAT(message, Not(HasSubstr(c.tenant))) << message;
    EXPECT_THAT(message, Not(HasSubstr(c.token))) << message;
    // Nor any 8-character piece of the secret.
    for (size_t i = 0; i + 8 <= c.tenant.size(); i += 4) {
      EXPECT_THAT(message, Not(HasSubstr(c.tenant.substr(i, 8)))) << message;
    }
  }
}

// The token field must look like a generated secret: names, placeholders
// and repetitions are refused, saying which rule failed, echoing nothing.
TEST(TokenTableTest, RefusesLowEntropyTokensSayingWhichRule) {
  struct Case {
    std::string token;
    std::string expected;
  };
  const Case cases[] = {
      {"team-vision-production", "only one of lower-case letters, upper-case letters and digits"},
      {"CHANGEME-CHANGEME", "only one of lower-case letters, upper-case letters and digits"},
      {"0000000000000000", "only one of lower-case letters, upper-case letters and digits"},
      {std::string(64, 'a'), "only one of lower-case letters, upper-case letters and digits"},
      {"abab1212abab1212abab", "4 different characters; at least 6"},
      {"aaaaaaaaaaaaaaaaaaaaaaa1", "2 different characters; at least 6"},
  };
  for (const auto& c : cases) {
    const std::string text = absl::StrCat("# tokens\nscheduler ", c.token, "\n");
    auto table = TokenTable::Parse(text, "t.txt");
    ASSERT_FALSE(table.ok()) << c.token;
    const std::string message(table.status().message());
    EXPECT_THAT(message, HasSubstr("line 2: the token (second field)")) << message;
    EXPECT_THAT(message, HasSubstr(c.expected)) << message;
    EXPECT_THAT(message, Not(HasSubstr(c.token))) << message;
    EXPECT_THAT(message, Not(HasSubstr("scheduler"))) << message;
  }
  // A token that is a tenant's name (of this line or another): swapped.
  auto same = TokenTable::Parse("team-2026-vision team-2026-vision\n", "t.txt");
  ASSERT_FALSE(same.ok());
  EXPECT_THAT(same.status().message(), HasSubstr("line 1: the token (second field) is the tenant "
                                                 "name of line 1"));
  EXPECT_THAT(same.status().message(), Not(HasSubstr("team-2026")));
  auto other = TokenTable::Parse(absl::StrCat("alpha ", kTokenA, "\nbeta-team-2026-xy ", kTokenB,
                                              "\ngamma beta-team-2026-xy\n"),
                                 "t.txt");
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(),
              HasSubstr("line 3: the token (second field) is the tenant name of line 2"));
  EXPECT_THAT(other.status().message(), Not(HasSubstr("beta-team")));
}

// What the documented rules accept: generated secrets of every usual form
// (openssl rand -hex / -base64, base64url, UUIDs) and names that are long,
// mix cases or carry digits.
TEST(TokenTableTest, AcceptsGeneratedTokensAndOrdinaryNames) {
  const std::string text =
      "scheduler 9f2c4e7a1b3d5f6081a2c3e4f5061728394a5b6c7d8e9f001122334455667789\n"
      "team-vision-production Zx8+Qm3kT1pV7rW9yB2nC5dF0hJ4lL6sU/aE1gI8oK0=\n"
      "AcmeCorpVision2Prod1 q7ZfK2xP9mWb4Lr1TnV8sYc0Hd6JgE3uAaQiXoRkMzN\n"
      "550e8400-e29b-41d4-a716-446655440000 0123456789abcdef\n"
      "team.a_2 8c1f0b6a-3e47-4d2b-9a55-7f1e2c3d4b5a\n"
      "deadbeef 7b0e3f9d2c814a65\n";
  auto table = TokenTable::Parse(text, "t.txt");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 6u);
  ASSERT_NE(table->Find("0123456789abcdef"), nullptr);
  EXPECT_EQ(*table->Find("0123456789abcdef"), "550e8400-e29b-41d4-a716-446655440000");
}

// Start-up and reload apply the same rules; a reload that fails them keeps
// the old tokens in force and says only the line and the rule.
TEST(AuthenticatorTest, SwappedLineFailsStartAndReloadKeepsOldTokens) {
  const std::string secret = "9f2c4e7a1b3d5f6081a2c3e4f5061728394a5b6c7d8e9f001122334455667789";
  const std::string swapped = absl::StrCat("# rotated\n", secret, " team-vision-production\n");
  const std::string path = WriteTemp("swapped_tokens.txt", swapped);
  auto refused = Authenticator::FromTokenFile(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("line 2: the tenant (first field) looks like a token"));
  EXPECT_THAT(std::string(refused.status().message()), Not(HasSubstr(secret.substr(0, 8))));

  WriteTemp("swapped_tokens.txt", absl::StrCat("alpha ", kTokenA, "\n"));
  auto auth = Authenticator::FromTokenFile(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  WriteTemp("swapped_tokens.txt", absl::StrCat("alpha ", kTokenA, "\n", swapped));
  auto failed = (*auth)->Reload();
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("line 3: the tenant (first field) looks like a token"));
  EXPECT_THAT(std::string(failed.status().message()), Not(HasSubstr(secret.substr(0, 8))));
  EXPECT_THAT(std::string(failed.status().message()), Not(HasSubstr("team-vision")));
  EXPECT_EQ((*auth)->token_count(), 1u);
  const std::string bearer_name = "Bearer team-vision-production";
  EXPECT_FALSE((*auth)->Authenticate(Bearer(bearer_name)).ok());
  const std::string bearer_a = absl::StrCat("Bearer ", kTokenA);
  EXPECT_EQ(*(*auth)->Authenticate(Bearer(bearer_a)), "alpha");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace habitat
