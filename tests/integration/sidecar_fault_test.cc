// Fault test: 100 traces go through the habitat-agent
// binary to the habitat-server binary, which is killed with SIGKILL three
// times while uploads are in flight and restarted on the same port and
// trace directory. Every trace must end up stored exactly once and the
// spool must end up empty.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/sidecar/spool_test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/files.h"
#include "testing/ports.h"

namespace habitat::agent {
namespace {

using ::habitat::agent::testing::DistinctTraces;
using ::habitat::agent::testing::IdOf;
using ::habitat::agent::testing::WriteSpoolTrace;
using ::habitat::testing::ChildProcess;
using ::habitat::testing::FilesWithSuffix;
using ::habitat::testing::ReadWholeFile;
using ::habitat::testing::ScratchDir;
using ::habitat::testing::UnusedPort;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

constexpr int kTraces = 100;

TEST(SidecarFaultTest, HundredTracesThroughThreeServerKillsAreStoredExactlyOnce) {
  auto traces = DistinctTraces(/*fixtures=*/10, kTraces);
  ASSERT_TRUE(traces.ok()) << traces.status();
  const absl::Time test_start = absl::Now();
  ScratchDir tmp;
  const std::string spool = tmp.Sub("spool");
  const std::string store = tmp.Sub("store");
  ASSERT_EQ(::mkdir(spool.c_str(), 0755), 0);
  std::vector<std::string> expected;
  for (int i = 0; i < kTraces; ++i) {
    WriteSpoolTrace(spool, absl::StrCat("trace", 1000 + i, ".trace"), (*traces)[i], i % 2 == 0);
    expected.push_back(IdOf((*traces)[i]).substr(7) + ".trace");
  }

  const int port = UnusedPort();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  int generation = 0;
  auto start_server = [&]() {
    ++generation;
    auto server = std::make_unique<ChildProcess>(
        std::vector<std::string>{HABITAT_SERVER_BINARY, "--address=" + address,
                                 "--metrics_address=", "--data_dir=" HABITAT_DATA_DIR,
                                 "--store=dir:" + store},
        tmp.Sub(absl::StrCat("server", generation, ".out")),
        tmp.Sub(absl::StrCat("server", generation, ".err")));
    const std::string log = server->WaitForStderr("serving on port", absl::Seconds(20));
    EXPECT_TRUE(absl::StrContains(log, "serving on port")) << log;
    return server;
  };
  std::unique_ptr<ChildProcess> server = start_server();
  ChildProcess agent(
      {HABITAT_AGENT_BINARY, "--spool_dir=" + spool, "--server=" + address, "--poll_ms=50",
       "--initial_backoff_ms=50", "--max_backoff_s=1", "--settle_s=0"},
      tmp.Sub("agent.out"), tmp.Sub("agent.err"));

  // Kill when these many receipts exist; each kill must leave work behind.
  const int thresholds[] = {15, 40, 65};
  int kills = 0;
  std::vector<absl::Duration> outages;
  const absl::Time deadline = test_start + absl::Seconds(55);
  while (absl::Now() < deadline) {
    const size_t receipts = FilesWithSuffix(spool, ".done").size();
    const size_t waiting = FilesWithSuffix(spool, ".trace").size();
    if (kills < 3 && receipts >= static_cast<size_t>(thresholds[kills])) {
      EXPECT_GT(waiting, 0u) << "kill " << kills + 1 << " came after the spool drained";
      // Staggered so the kills land at different points of an upload.
      absl::SleepFor(absl::Milliseconds(25 * kills));
      ASSERT_TRUE(server->Signal(SIGKILL));
      ASSERT_NE(server->Wait(absl::Seconds(10)), -1);
      const absl::Time killed = absl::Now();
      ++kills;
      // Down for a while, longer each time, so the agent backs off.
      absl::SleepFor(absl::Milliseconds(300 * kills));
      server = start_server();
      outages.push_back(absl::Now() - killed);
      continue;
    }
    if (kills == 3 && waiting == 0) break;
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_EQ(kills, 3) << ReadWholeFile(tmp.Sub("agent.err"));
  EXPECT_THAT(FilesWithSuffix(spool, ".trace"), IsEmpty()) << ReadWholeFile(tmp.Sub("agent.err"));

  ASSERT_TRUE(agent.Signal(SIGTERM));
  const int status = agent.Wait(absl::Seconds(10));
  ASSERT_NE(status, -1);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string agent_log = agent.Stderr();
  if (std::getenv("SIDECAR_FAULT_LOG") != nullptr) std::cerr << agent_log;

  // Exactly the 100 content addresses, one file each, in the store.
  EXPECT_THAT(FilesWithSuffix(store, ".trace"), UnorderedElementsAreArray(expected));
  EXPECT_THAT(FilesWithSuffix(spool + "/rejected", ".trace"), IsEmpty());
  const std::vector<std::string> receipts = FilesWithSuffix(spool, ".done");
  EXPECT_EQ(receipts.size(), static_cast<size_t>(kTraces));
  int acks_lost = 0;
  for (const auto& name : receipts) {
    acks_lost += absl::StrContains(ReadWholeFile(spool + "/" + name), "created=false") ? 1 : 0;
  }
  EXPECT_THAT(agent_log, ::testing::HasSubstr(absl::StrCat("uploaded ", kTraces)));
  // Leftover temporaries of writes the kills interrupted (not traces).
  size_t store_temporaries = 0;
  for (const auto& name : FilesWithSuffix(store, "")) {
    store_temporaries += name != "." && name != ".." && !absl::EndsWith(name, ".trace");
  }
  std::cerr << "fault test: " << kTraces << " traces, 3 SIGKILLs, outages";
  for (auto d : outages) std::cerr << " " << absl::FormatDuration(d);
  std::cerr << "; re-uploads after a lost acknowledgement: " << acks_lost
            << "; interrupted store writes left behind: " << store_temporaries << "; total "
            << absl::FormatDuration(absl::Now() - test_start) << "\n";
}

}  // namespace
}  // namespace habitat::agent
