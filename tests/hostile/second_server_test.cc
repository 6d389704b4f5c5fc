// A second habitat-server started on an address the first one serves must
// fail to start: with SO_REUSEPORT (gRPC's default) both would run and the
// kernel would split connections between them, so that a trace uploaded to
// one is NOT_FOUND on the other.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/server_process.h"
#include "tests/hostile/hostile_support.h"

namespace habitat::hostile {
namespace {

using ::habitat::testing::ServerProcess;
using ::testing::HasSubstr;

// Waits (bounded) for "cannot start" and the process's exit; true when both
// came.
bool Exits(ServerProcess& server, absl::Duration timeout) {
  if (!server.WaitForStderr("cannot start", timeout)) return false;
  const absl::Time end = absl::Now() + absl::Seconds(5);
  while (server.Alive() && absl::Now() < end) absl::SleepFor(absl::Milliseconds(20));
  return !server.Alive();
}

TEST(SecondServerTest, RefusesTheMainAddressOfARunningServer) {
  ServerProcess first({});
  ASSERT_TRUE(first.WaitServing()) << first.Stderr();
  ServerProcess second({{absl::StrCat("--address=127.0.0.1:", first.port())}});
  EXPECT_TRUE(Exits(second, absl::Seconds(30))) << second.Stderr();
  EXPECT_THAT(second.Stderr(),
              HasSubstr(absl::StrCat("cannot listen on '127.0.0.1:", first.port(), "'")));
  EXPECT_TRUE(first.Alive());
}

TEST(SecondServerTest, RefusesTheHealthAddressOfARunningServer) {
  ServerProcess first({});
  ASSERT_TRUE(first.WaitServing()) << first.Stderr();
  ServerProcess second({{absl::StrCat("--health_address=127.0.0.1:", first.health_port())}});
  EXPECT_TRUE(Exits(second, absl::Seconds(30))) << second.Stderr();
  EXPECT_THAT(second.Stderr(), HasSubstr("cannot listen on --health_address"));
}

}  // namespace
}  // namespace habitat::hostile
