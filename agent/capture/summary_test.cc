#include "agent/capture/summary.h"

#include "gtest/gtest.h"

namespace habitat {
namespace agent {
namespace {

TEST(SummaryTest, CountsPassesKernelsAndTimes) {
  Trace t;
  Operation a;
  a.forward.time_ns = 1000;
  a.forward.kernels.resize(2);
  a.forward.memory.resize(1);
  a.backward = Pass();
  a.backward->time_ns = 500;
  a.backward->kernels.resize(1);
  Operation b;
  b.forward.time_ns = 250;
  b.forward.kernels.resize(1);
  t.operations = {a, b};
  Kernel stray;
  stray.duration_ns = 70;
  t.unattributed_kernels = {stray};
  t.iteration_gpu_busy_ns = 1700;
  t.iteration_wall_ns = 3000;
  const TraceSummary s = Summarize(t);
  EXPECT_EQ(s.operations, 2);
  EXPECT_EQ(s.operations_with_backward, 1);
  EXPECT_EQ(s.kernels, 5);
  EXPECT_EQ(s.unattributed_kernels, 1);
  EXPECT_EQ(s.memory_activities, 1);
  EXPECT_EQ(s.pass_time_ns, 1750);
  EXPECT_EQ(s.unattributed_kernel_ns, 70);
  EXPECT_EQ(s.gpu_busy_ns, 1700);
  EXPECT_EQ(s.wall_ns, 3000);
  const std::string line = FormatSummary(s);
  EXPECT_NE(line.find("2 ops (1 with backward), 5 kernels (1 unattributed)"), std::string::npos)
      << line;
  EXPECT_NE(line.find("GPU busy 0.002 ms of 0.003 ms wall"), std::string::npos) << line;
}

}  // namespace
}  // namespace agent
}  // namespace habitat
