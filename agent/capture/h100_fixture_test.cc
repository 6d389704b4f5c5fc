// Checks the agent's real H100 capture (tests/testdata/agent/h100, written
// by tests/gpu/agent_gpu_test.py with habitat_agent.OperationTracker) with the
// generated habitat.v1.Trace and the server's validation, and compares it
// with the torch.profiler (Kineto) capture of the same workload on the
// same GPU type: ResNet-50, batch 16, fp32, SGD momentum 0.9.
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include "common/file_io.h"
#include "core/kineto/kineto_import.h"
#include "core/trace/trace_validation.h"
#include "gtest/gtest.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {
namespace {

using habitat::v1::Kernel;
using habitat::v1::Operation;
using habitat::v1::Pass;
using habitat::v1::Trace;

const std::string kDir = std::string(HABITAT_TESTDATA_DIR);

Trace Load(const std::string& path) {
  auto bytes = ReadFile(path);  // inflates gzip
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  Trace t;
  EXPECT_TRUE(bytes.ok() && t.ParseFromString(*bytes)) << path;
  return t;
}

template <typename F>
void ForEachKernel(const Trace& t, F f) {
  for (const Operation& o : t.operations()) {
    for (const Kernel& k : o.forward().kernels()) f(o, k);
    for (const Kernel& k : o.backward().kernels()) f(o, k);
  }
  for (const Kernel& k : t.unattributed_kernels()) f(Operation(), k);
}

int64_t PassSum(const Trace& t) {
  int64_t sum = 0;
  for (const Operation& o : t.operations()) {
    sum += o.forward().time_ns() + o.backward().time_ns();
  }
  return sum;
}

class AgentH100FixtureTest : public ::testing::Test {
 protected:
  void SetUp() override { trace_ = Load(kDir + "/agent/h100/resnet50_b16_fp32.trace.gz"); }
  Trace trace_;
};

TEST_F(AgentH100FixtureTest, ParsesAndPassesServerValidation) {
  EXPECT_TRUE(ValidateTrace(trace_).ok()) << ValidateTrace(trace_);
  EXPECT_EQ(trace_.format_version(), 1u);
  EXPECT_EQ(trace_.source(), "habitat-agent");
  EXPECT_EQ(trace_.model_name(), "resnet50");
  EXPECT_EQ(trace_.batch_size(), 16u);
  EXPECT_EQ(trace_.precision(), habitat::v1::PRECISION_FP32);
  EXPECT_EQ(trace_.origin().name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(trace_.origin().compute_capability_major(), 9u);
  EXPECT_EQ(trace_.origin().compute_capability_minor(), 0u);
  EXPECT_EQ(trace_.origin().sm_count(), 132u);
  EXPECT_GT(trace_.origin().memory_bytes(), uint64_t{79} << 30);
  EXPECT_GT(trace_.origin().l2_cache_bytes(), 0u);
  EXPECT_TRUE(trace_.frameworks().torch().rfind("2.11", 0) == 0) << trace_.frameworks().torch();
  EXPECT_EQ(trace_.frameworks().cuda(), "13.0");
}

TEST_F(AgentH100FixtureTest, KernelsAreCompleteAndOnTheHostTimeline) {
  int kernels = 0, mangled = 0;
  // The tracked region; iteration_wall_ns is the untracked median, shorter
  // because recording slows the host.
  const int64_t tracked_wall = std::stoll(trace_.metadata().at("agent.tracked_wall_ns"));
  EXPECT_LT(trace_.iteration_wall_ns(), tracked_wall);
  ForEachKernel(trace_, [&](const Operation& o, const Kernel& k) {
    ++kernels;
    SCOPED_TRACE(o.name() + " / " + k.name());
    if (k.name().rfind("_Z", 0) == 0) {
      // Left mangled only where the demangler fails (as torch.profiler
      // does: a few cuDNN CUTLASS kernels).
      int status = 0;
      char* d = abi::__cxa_demangle(k.name().c_str(), nullptr, nullptr, &status);
      std::free(d);
      EXPECT_NE(status, 0) << "demanglable name left mangled";
      ++mangled;
    }
    EXPECT_GE(k.grid().x(), 1u);
    EXPECT_GE(k.block().x(), 1u);
    EXPECT_GT(k.registers_per_thread(), 0u);
    EXPECT_GT(k.duration_ns(), 0);
    EXPECT_NE(k.correlation_id(), 0u);
    ASSERT_TRUE(k.has_launch_time());
    // The launch call starts before its kernel runs, inside the iteration.
    EXPECT_GE(k.launch_ns(), 0);
    EXPECT_LE(k.launch_ns(), k.start_ns());
    EXPECT_LE(k.start_ns() + k.duration_ns(), tracked_wall);
  });
  EXPECT_EQ(kernels, 717);
  EXPECT_LT(mangled, 10);
  EXPECT_EQ(trace_.unattributed_kernels_size(), 0);
  EXPECT_EQ(trace_.metadata().at("agent.kernels"), "717");
  EXPECT_EQ(trace_.metadata().at("agent.memory_activities"), "11");
  EXPECT_EQ(trace_.metadata().at("agent.dropped_records"), "0");
}

TEST_F(AgentH100FixtureTest, PerOpSumMatchesGpuBusyTime) {
  const int64_t sum = PassSum(trace_);
  const int64_t busy = trace_.iteration_gpu_busy_ns();
  EXPECT_GT(busy, 0);
  EXPECT_GE(sum, busy);  // the union cannot exceed the sum
  EXPECT_LT(static_cast<double>(sum - busy) / busy, 0.01) << "sum " << sum << " busy " << busy;
  EXPECT_LT(busy, trace_.iteration_wall_ns());
}

TEST_F(AgentH100FixtureTest, BackwardPassesAreLinkedToTheirForwardOps) {
  int with_backward = 0, conv = 0, conv_linked = 0, accumulate = 0;
  for (const Operation& o : trace_.operations()) {
    if (o.has_backward()) ++with_backward;
    if (o.name() == "aten::conv2d") {
      ++conv;
      if (o.has_backward() && o.backward().recorded_name() == "ConvolutionBackward0" &&
          o.backward().kernels_size() > 0 && o.sequence_number() >= 0) {
        ++conv_linked;
      }
    }
    if (o.name() == "torch::autograd::AccumulateGrad") {
      ++accumulate;
      EXPECT_EQ(o.forward().kernels_size(), 0);
    }
  }
  EXPECT_EQ(conv, 53);  // ResNet-50's convolutions
  EXPECT_EQ(conv_linked, conv);
  EXPECT_EQ(accumulate, 161);  // one per parameter tensor
  EXPECT_EQ(trace_.metadata().at("agent.backward_nodes_linked"), "178");
  EXPECT_EQ(with_backward, 337);
}

// The same workload captured by torch.profiler and imported: the agent must
// see the same GPU work (kernel names and counts) and nearly the same busy
// time (different iterations of the same program).
TEST_F(AgentH100FixtureTest, AgreesWithTheKinetoCaptureOfTheSameWorkload) {
  auto json = ReadFile(kDir + "/kineto/h100/resnet50_b16_fp32.json.gz");
  ASSERT_TRUE(json.ok()) << json.status();
  KinetoImportOptions options;
  options.batch_size = 16;
  auto kineto = ImportKinetoTrace(*json, options);
  ASSERT_TRUE(kineto.ok()) << kineto.status();
  std::map<std::string, int> ours, theirs;
  ForEachKernel(trace_, [&](const Operation&, const Kernel& k) { ++ours[k.name()]; });
  ForEachKernel(*kineto, [&](const Operation&, const Kernel& k) { ++theirs[k.name()]; });
  EXPECT_EQ(ours, theirs);
  EXPECT_EQ(trace_.operations_size(), kineto->operations_size());
  const double busy_ratio =
      static_cast<double>(trace_.iteration_gpu_busy_ns()) / kineto->iteration_gpu_busy_ns();
  EXPECT_NEAR(busy_ratio, 1.0, 0.02);
}

}  // namespace
}  // namespace habitat
