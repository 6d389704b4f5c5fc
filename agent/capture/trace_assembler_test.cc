#include "agent/capture/trace_assembler.h"

#include <string>
#include <vector>

#include "agent/capture/fake_kernel_source.h"
#include "agent/capture/test_script.h"
#include "gtest/gtest.h"

namespace habitat {
namespace agent {
namespace {

constexpr int64_t W = 1000000;  // window start on the source clock
constexpr uint64_t kFwd = 1;    // forward (Python) thread
constexpr uint64_t kBwd = 2;    // autograd engine thread

std::vector<std::string> KernelNames(const Pass& p) {
  std::vector<std::string> names;
  for (const Kernel& k : p.kernels) names.push_back(k.name);
  return names;
}

AssemblyOptions Window(int64_t start, int64_t end) {
  AssemblyOptions o;
  o.model_name = "toy";
  o.batch_size = 4;
  o.precision = Precision::kFp32;
  o.origin.name = "NVIDIA H100 80GB HBM3";
  o.window_start_ns = start;
  o.window_end_ns = end;
  return o;
}

// A small iteration: conv2d -> relu -> add forward, an unattributed kernel,
// a sync, then the autograd thread runs ReluBackward0,
// ConvolutionBackward0 and an AccumulateGrad.
class IterationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(source_.Start().ok());
    OpScript s(&source_);
    // Launched before tracking began: dropped.
    s.Kernel("before", W - 100, W - 50, W + 10);

    s.Begin("aten::conv2d", kFwd, W + 100, 10);
    s.Begin("aten::convolution", kFwd, W + 110, 10);
    s.Kernel("conv_fwd", W + 120, W + 500, W + 2500);
    s.End(kFwd, W + 130);
    s.End(kFwd, W + 140);

    const uint64_t relu = s.Begin("aten::relu", kFwd, W + 200, 11);
    Argument a;
    a.name = "0";
    a.kind = Argument::Kind::kTensor;
    a.tensor = {{4, 8, 16, 16}, "float"};
    s.SetArguments(relu, {a});
    s.Memset(1 << 20, W + 205, W + 2500, W + 2600);
    s.Kernel("relu_fwd", W + 210, W + 2600, W + 3000);
    s.End(kFwd, W + 220);

    s.Begin("aten::add", kFwd, W + 300);  // no grad: no sequence number
    s.Kernel("add", W + 310, W + 2900, W + 3200, /*stream=*/8);
    s.End(kFwd, W + 320);

    s.Kernel("stray", W + 350, W + 3300, W + 3400);  // no op pushed
    source_.CallApi("cudaDeviceSynchronize", W + 360, W + 3500);

    s.Begin("autograd::engine::evaluate_function: ReluBackward0", kBwd, W + 4000);
    s.Begin("ReluBackward0", kBwd, W + 4010, 11, true, kFwd);
    // The engine thread has its own sequence counter; 10 here must not
    // link anything.
    s.Begin("aten::threshold_backward", kBwd, W + 4020, 10);
    s.Kernel("relu_bwd", W + 4030, W + 4100, W + 4400);
    s.End(kBwd, W + 4040);
    s.End(kBwd, W + 4050);
    s.End(kBwd, W + 4060);

    s.Begin("autograd::engine::evaluate_function: ConvolutionBackward0", kBwd, W + 4500);
    s.Begin("ConvolutionBackward0", kBwd, W + 4505, 10, true, kFwd);
    s.Kernel("dgrad", W + 4510, W + 4600, W + 5600);
    s.Kernel("wgrad", W + 4520, W + 5600, W + 6000);
    s.End(kBwd, W + 4530);
    s.End(kBwd, W + 4540);

    s.Begin(
        "autograd::engine::evaluate_function: "
        "torch::autograd::AccumulateGrad",
        kBwd, W + 6100);
    s.Begin("torch::autograd::AccumulateGrad", kBwd, W + 6105, -1, true, kFwd);
    s.Kernel("accum", W + 6110, W + 6200, W + 6300);
    s.End(kBwd, W + 6120);
    s.End(kBwd, W + 6130);

    ops_ = s.ops();
    ASSERT_TRUE(source_.Stop(&records_).ok());
    Status st = AssembleTrace(ops_, records_, Window(W, W + 10000), &trace_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  FakeKernelSource source_;
  std::vector<OpEvent> ops_;
  ActivityRecords records_;
  Trace trace_;
};

TEST_F(IterationTest, OperationsAreTopLevelOpsInStartOrder) {
  ASSERT_EQ(trace_.operations.size(), 4u);
  EXPECT_EQ(trace_.operations[0].name, "aten::conv2d");
  EXPECT_EQ(trace_.operations[1].name, "aten::relu");
  EXPECT_EQ(trace_.operations[2].name, "aten::add");
  EXPECT_EQ(trace_.operations[3].name, "torch::autograd::AccumulateGrad");
  EXPECT_EQ(trace_.operations[0].cpu_start_ns, 100);
  // The accumulation followed ConvolutionBackward0, conv2d's backward pass.
  EXPECT_EQ(trace_.operations[3].gradient_producer, std::optional<uint32_t>(0));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(trace_.operations[i].gradient_producer.has_value());
  EXPECT_EQ(trace_.operations[0].cpu_duration_ns, 40);
  ASSERT_EQ(trace_.operations[1].arguments.size(), 1u);
  EXPECT_EQ(trace_.operations[1].arguments[0].tensor.shape, (std::vector<int64_t>{4, 8, 16, 16}));
}

TEST_F(IterationTest, KernelsJoinToTheirTopLevelOpThroughExternalIds) {
  const Operation& conv = trace_.operations[0];
  // Launched inside the nested aten::convolution: belongs to conv2d.
  EXPECT_EQ(KernelNames(conv.forward), std::vector<std::string>{"conv_fwd"});
  EXPECT_EQ(conv.forward.time_ns, 2000);
  const Kernel& k = conv.forward.kernels[0];
  EXPECT_EQ(k.start_ns, 500);
  EXPECT_EQ(k.duration_ns, 2000);
  EXPECT_TRUE(k.has_launch_time);
  EXPECT_EQ(k.launch_ns, 120);
  EXPECT_EQ(k.grid.x, 80u);
  EXPECT_EQ(k.grid.y, 2u);
  EXPECT_EQ(k.block.x, 256u);
  EXPECT_EQ(k.registers_per_thread, 40u);
  EXPECT_EQ(k.static_shared_memory_bytes, 1024u);
  EXPECT_EQ(k.dynamic_shared_memory_bytes, 4096u);
  EXPECT_EQ(k.stream, 7u);
  EXPECT_NE(k.correlation_id, 0u);

  const Operation& relu = trace_.operations[1];
  EXPECT_EQ(KernelNames(relu.forward), std::vector<std::string>{"relu_fwd"});
  ASSERT_EQ(relu.forward.memory.size(), 1u);
  EXPECT_EQ(relu.forward.memory[0].kind, MemoryKind::kMemset);
  EXPECT_EQ(relu.forward.memory[0].bytes, 1u << 20);
  EXPECT_EQ(relu.forward.memory[0].launch_ns, 205);
  EXPECT_EQ(relu.forward.time_ns, 400 + 100);  // kernel + memset
}

TEST_F(IterationTest, BackwardNodesLinkToTheForwardThatCreatedThem) {
  const Operation& conv = trace_.operations[0];
  ASSERT_TRUE(conv.backward.has_value());
  EXPECT_EQ(conv.backward->recorded_name, "ConvolutionBackward0");
  EXPECT_EQ(KernelNames(*conv.backward), (std::vector<std::string>{"dgrad", "wgrad"}));
  EXPECT_EQ(conv.backward->time_ns, 1400);
  EXPECT_EQ(conv.sequence_number, 10);

  const Operation& relu = trace_.operations[1];
  ASSERT_TRUE(relu.backward.has_value());
  EXPECT_EQ(relu.backward->recorded_name, "ReluBackward0");
  EXPECT_EQ(KernelNames(*relu.backward), std::vector<std::string>{"relu_bwd"});
  EXPECT_EQ(relu.sequence_number, 11);

  EXPECT_FALSE(trace_.operations[2].backward.has_value());  // no grad
  EXPECT_EQ(trace_.operations[2].sequence_number, -1);
}

TEST_F(IterationTest, UnlinkedNodeBecomesItsOwnBackwardOperation) {
  const Operation& acc = trace_.operations[3];
  EXPECT_TRUE(acc.forward.kernels.empty());
  EXPECT_EQ(acc.forward.time_ns, 0);
  ASSERT_TRUE(acc.backward.has_value());
  EXPECT_EQ(acc.backward->recorded_name, "torch::autograd::AccumulateGrad");
  EXPECT_EQ(KernelNames(*acc.backward), std::vector<std::string>{"accum"});
  EXPECT_EQ(acc.cpu_start_ns, 6100);
  EXPECT_EQ(trace_.metadata.at("agent.backward_nodes"), "3");
  EXPECT_EQ(trace_.metadata.at("agent.backward_nodes_linked"), "2");
  EXPECT_EQ(trace_.metadata.at("agent.gradient_accumulations"), "1");
  EXPECT_EQ(trace_.metadata.at("agent.gradient_producers"), "1");
}

TEST_F(IterationTest, KernelsWithoutAnOpAreUnattributed) {
  ASSERT_EQ(trace_.unattributed_kernels.size(), 1u);
  EXPECT_EQ(trace_.unattributed_kernels[0].name, "stray");
  EXPECT_EQ(trace_.unattributed_kernels[0].launch_ns, 350);
  EXPECT_EQ(trace_.metadata.at("agent.unattributed_kernels"), "1");
  EXPECT_EQ(trace_.metadata.at("agent.unattributed_kernel_ns"), "100");
  // The kernel launched before the window is not in the trace at all.
  EXPECT_EQ(trace_.metadata.at("agent.outside_window"), "1");
  EXPECT_EQ(trace_.metadata.at("agent.kernels"), "8");
  EXPECT_EQ(trace_.metadata.at("agent.memory_activities"), "1");
}

TEST_F(IterationTest, BusyTimeIsTheUnionAndWallIsTheWindow) {
  // relu_fwd [2600,3000) and add [2900,3200) overlap by 100 ns.
  EXPECT_EQ(trace_.iteration_gpu_busy_ns, 4600);
  EXPECT_EQ(trace_.metadata.at("agent.gpu_time_ns"), "4700");
  EXPECT_EQ(trace_.iteration_wall_ns, 10000);
  int64_t passes = 0;
  for (const Operation& o : trace_.operations) {
    passes += o.forward.time_ns + (o.backward ? o.backward->time_ns : 0);
  }
  EXPECT_EQ(passes + 100, 4700);  // + the unattributed kernel
}

TEST_F(IterationTest, WallTimeCanBeOverriddenByAnUntrackedTiming) {
  EXPECT_EQ(trace_.metadata.at("agent.tracked_wall_ns"), "10000");
  AssemblyOptions o = Window(W, W + 10000);
  o.iteration_wall_override_ns = 7500;
  Trace t;
  ASSERT_TRUE(AssembleTrace(ops_, records_, o, &t).ok());
  EXPECT_EQ(t.iteration_wall_ns, 7500);
  EXPECT_EQ(t.metadata.at("agent.tracked_wall_ns"), "10000");
  o.iteration_wall_override_ns = -1;
  const Status st = AssembleTrace(ops_, records_, o, &t);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("iteration_wall_override_ns"), std::string::npos);
}

uint64_t IdOf(const std::vector<OpEvent>& ops, const std::string& name) {
  for (const OpEvent& e : ops) {
    if (e.name == name) return e.id;
  }
  ADD_FAILURE() << "no op event " << name;
  return 0;
}

TEST_F(IterationTest, RerunTimesAttachToTheOperationOfTheirForwardOp) {
  EXPECT_EQ(trace_.metadata.count("agent.rerun_operations"), 0u);
  AssemblyOptions o = Window(W, W + 10000);
  o.rerun_times[IdOf(ops_, "aten::conv2d")] = {2100, 1500};
  o.rerun_times[IdOf(ops_, "aten::add")] = {90, 70};  // add has no backward
  // A nested op and a backward node are not operations' forward ops.
  o.rerun_times[IdOf(ops_, "aten::convolution")] = {5, 5};
  o.rerun_times[IdOf(ops_, "ReluBackward0")] = {6, 6};
  Trace t;
  const Status st = AssembleTrace(ops_, records_, o, &t);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(t.operations.size(), 4u);
  const Operation& conv = t.operations[0];
  EXPECT_EQ(conv.forward.rerun_time_ns, 2100);
  ASSERT_TRUE(conv.backward.has_value());
  EXPECT_EQ(conv.backward->rerun_time_ns, 1500);
  EXPECT_EQ(conv.forward.time_ns, 2000);  // CUPTI times stay as they were
  EXPECT_EQ(conv.backward->time_ns, 1400);
  const Operation& relu = t.operations[1];
  EXPECT_EQ(relu.forward.rerun_time_ns, 0);
  EXPECT_EQ(relu.backward->rerun_time_ns, 0);
  const Operation& add = t.operations[2];
  EXPECT_EQ(add.forward.rerun_time_ns, 90);
  EXPECT_FALSE(add.backward.has_value());
  EXPECT_EQ(t.operations[3].backward->rerun_time_ns, 0);  // AccumulateGrad
  EXPECT_EQ(t.metadata.at("agent.rerun_operations"), "2");
  EXPECT_EQ(t.metadata.at("agent.rerun_unmatched"), "2");
}

TEST_F(IterationTest, NegativeRerunTimeIsRejectedNamingTheOp) {
  AssemblyOptions o = Window(W, W + 10000);
  o.rerun_times[IdOf(ops_, "aten::relu")] = {10, -3};
  Trace t;
  const Status st = AssembleTrace(ops_, records_, o, &t);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("(\"aten::relu\")"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("backward_ns -3"), std::string::npos) << st.message();
}

TEST_F(IterationTest, BatchRerunsBecomeEachPassListByBatch) {
  EXPECT_EQ(trace_.metadata.count("agent.batch_rerun_operations"), 0u);
  AssemblyOptions o = Window(W, W + 10000);
  // Out of order; the backward not measured at 8 and 64.
  o.batch_reruns[IdOf(ops_, "aten::conv2d")] = {
      {64, 7000, 0}, {16, 2100, 1500}, {8, 1200, 0}, {32, 3900, 2800}};
  o.batch_reruns[IdOf(ops_, "aten::add")] = {{16, 90, 70}};  // add has no backward
  o.batch_reruns[IdOf(ops_, "ReluBackward0")] = {{16, 6, 6}};
  Trace t;
  const Status st = AssembleTrace(ops_, records_, o, &t);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const Operation& conv = t.operations[0];
  ASSERT_EQ(conv.forward.batch_reruns.size(), 4u);
  EXPECT_EQ(conv.forward.batch_reruns[0].batch_size, 8u);
  EXPECT_EQ(conv.forward.batch_reruns[0].rerun_time_ns, 1200);
  EXPECT_EQ(conv.forward.batch_reruns[3].batch_size, 64u);
  EXPECT_EQ(conv.forward.batch_reruns[3].rerun_time_ns, 7000);
  ASSERT_EQ(conv.backward->batch_reruns.size(), 2u);
  EXPECT_EQ(conv.backward->batch_reruns[0].batch_size, 16u);
  EXPECT_EQ(conv.backward->batch_reruns[1].rerun_time_ns, 2800);
  EXPECT_EQ(conv.forward.rerun_time_ns, 0);                    // rerun_times is another option
  EXPECT_EQ(t.operations[1].forward.batch_reruns.size(), 0u);  // relu
  EXPECT_EQ(t.operations[2].forward.batch_reruns.size(), 1u);  // add
  EXPECT_EQ(t.metadata.at("agent.batch_rerun_operations"), "2");
  EXPECT_EQ(t.metadata.at("agent.batch_rerun_unmatched"), "1");
}

TEST_F(IterationTest, BadBatchRerunsAreRejectedNamingTheOp) {
  const struct {
    std::vector<BatchRerunTime> reruns;
    std::string says;
  } cases[] = {
      {{{0, 10, 10}}, "at batch 0: the batch must be >= 1"},
      {{{16, -1, 10}}, "forward_ns -1"},
      {{{16, 10, 10}, {32, 20, 20}, {16, 11, 11}}, "at batch 16: that batch is given twice"},
  };
  for (const auto& c : cases) {
    AssemblyOptions o = Window(W, W + 10000);
    o.batch_reruns[IdOf(ops_, "aten::conv2d")] = c.reruns;
    Trace t;
    const Status st = AssembleTrace(ops_, records_, o, &t);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("(\"aten::conv2d\")"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << st.message();
  }
}

TEST_F(IterationTest, SynchronisationsAreHostEvents) {
  ASSERT_EQ(trace_.host_events.size(), 1u);
  EXPECT_EQ(trace_.host_events[0].name, "cudaDeviceSynchronize");
  EXPECT_EQ(trace_.host_events[0].cpu_start_ns, 360);
  EXPECT_EQ(trace_.host_events[0].cpu_duration_ns, 3140);
}

TEST_F(IterationTest, TraceLevelFieldsComeFromTheOptions) {
  EXPECT_EQ(trace_.format_version, 1u);
  EXPECT_EQ(trace_.model_name, "toy");
  EXPECT_EQ(trace_.batch_size, 4u);
  EXPECT_EQ(trace_.precision, Precision::kFp32);
  EXPECT_EQ(trace_.origin.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(trace_.source, "habitat-agent");
}

TEST(TraceAssemblerTest, NodesOfOneForwardMergeNamedAfterTheLongest) {
  FakeKernelSource source;
  ASSERT_TRUE(source.Start().ok());
  OpScript s(&source);
  // aten::linear creates two nodes (t -> TBackward0, addmm -> AddmmBackward0).
  s.Begin("aten::linear", kFwd, W + 10, 20);
  s.Begin("aten::t", kFwd, W + 11, 20);
  s.End(kFwd, W + 12);
  s.Begin("aten::addmm", kFwd, W + 13, 21);
  s.Kernel("gemm", W + 14, W + 100, W + 600);
  s.End(kFwd, W + 15);
  s.End(kFwd, W + 16);
  s.Begin("autograd::engine::evaluate_function: AddmmBackward0", kBwd, W + 700);
  s.Begin("AddmmBackward0", kBwd, W + 701, 21, true, kFwd);
  s.Kernel("gemm_dgrad", W + 702, W + 800, W + 1300);
  s.Kernel("gemm_wgrad", W + 703, W + 1300, W + 1800);
  s.End(kBwd, W + 704);
  s.End(kBwd, W + 705);
  s.Begin("autograd::engine::evaluate_function: TBackward0", kBwd, W + 1900);
  s.Begin("TBackward0", kBwd, W + 1901, 20, true, kFwd);
  s.Kernel("copy", W + 1902, W + 1950, W + 2000);
  s.End(kBwd, W + 1903);
  s.End(kBwd, W + 1904);
  ActivityRecords records;
  ASSERT_TRUE(source.Stop(&records).ok());
  Trace t;
  ASSERT_TRUE(AssembleTrace(s.ops(), records, Window(W, W + 3000), &t).ok());
  ASSERT_EQ(t.operations.size(), 1u);
  const Operation& linear = t.operations[0];
  ASSERT_TRUE(linear.backward.has_value());
  EXPECT_EQ(linear.backward->recorded_name, "AddmmBackward0");
  EXPECT_EQ(linear.sequence_number, 21);
  EXPECT_EQ(KernelNames(*linear.backward),
            (std::vector<std::string>{"gemm_dgrad", "gemm_wgrad", "copy"}));
  EXPECT_EQ(linear.backward->time_ns, 1050);
}

TEST(TraceAssemblerTest, SequenceNumbersAreKeyedByThreadAndTakeTheCreator) {
  FakeKernelSource source;
  ASSERT_TRUE(source.Start().ok());
  OpScript s(&source);
  // aten::empty peeks 30 without creating a node; aten::mul creates it.
  s.Begin("aten::empty", kFwd, W + 10, 30);
  s.End(kFwd, W + 11);
  s.Begin("aten::mul", kFwd, W + 20, 30);
  s.Kernel("mul", W + 21, W + 100, W + 200);
  s.End(kFwd, W + 22);
  // Another forward thread whose counter is also at 30, later in time.
  s.Begin("aten::sigmoid", 3, W + 30, 30);
  s.Kernel("sigmoid", W + 31, W + 200, W + 300);
  s.End(3, W + 32);
  s.Begin("MulBackward0", kBwd, W + 400, 30, true, kFwd);
  s.Kernel("mul_bwd", W + 401, W + 500, W + 600);
  s.End(kBwd, W + 402);
  ActivityRecords records;
  ASSERT_TRUE(source.Stop(&records).ok());
  Trace t;
  ASSERT_TRUE(AssembleTrace(s.ops(), records, Window(W, W + 1000), &t).ok());
  ASSERT_EQ(t.operations.size(), 3u);
  EXPECT_EQ(t.operations[0].name, "aten::empty");
  EXPECT_FALSE(t.operations[0].backward.has_value());
  EXPECT_EQ(t.operations[1].name, "aten::mul");
  ASSERT_TRUE(t.operations[1].backward.has_value());
  EXPECT_EQ(KernelNames(*t.operations[1].backward), std::vector<std::string>{"mul_bwd"});
  EXPECT_EQ(t.operations[2].name, "aten::sigmoid");
  EXPECT_FALSE(t.operations[2].backward.has_value());
}

TEST(TraceAssemblerTest, BackwardOnTheForwardThreadLinksWithoutForwardThread) {
  // CPU autograd runs nodes on the calling thread; the node record then
  // carries no forward thread and its own thread is the forward one.
  FakeKernelSource source;
  ASSERT_TRUE(source.Start().ok());
  OpScript s(&source);
  s.Begin("aten::tanh", kFwd, W + 10, 5);
  s.Kernel("tanh", W + 11, W + 20, W + 30);
  s.End(kFwd, W + 12);
  s.Begin("autograd::engine::evaluate_function: TanhBackward0", kFwd, W + 50);
  s.Begin("TanhBackward0", kFwd, W + 51, 5, true, 0);
  s.Kernel("tanh_bwd", W + 52, W + 60, W + 70);
  s.End(kFwd, W + 53);
  s.End(kFwd, W + 54);
  ActivityRecords records;
  ASSERT_TRUE(source.Stop(&records).ok());
  Trace t;
  ASSERT_TRUE(AssembleTrace(s.ops(), records, Window(W, W + 100), &t).ok());
  ASSERT_EQ(t.operations.size(), 1u);
  ASSERT_TRUE(t.operations[0].backward.has_value());
  EXPECT_EQ(t.operations[0].backward->recorded_name, "TanhBackward0");
}

TEST(TraceAssemblerTest, GpuStartsBeforeTheWindowAreClamped) {
  FakeKernelSource source;
  ASSERT_TRUE(source.Start().ok());
  OpScript s(&source);
  s.Begin("aten::add", kFwd, W + 1);
  s.Kernel("add", W + 2, W - 30, W + 70);  // GPU clock slightly behind
  s.End(kFwd, W + 3);
  ActivityRecords records;
  ASSERT_TRUE(source.Stop(&records).ok());
  Trace t;
  ASSERT_TRUE(AssembleTrace(s.ops(), records, Window(W, W + 100), &t).ok());
  EXPECT_EQ(t.operations[0].forward.kernels[0].start_ns, 0);
  EXPECT_EQ(t.operations[0].forward.kernels[0].duration_ns, 100);
  EXPECT_EQ(t.metadata.at("agent.clamped_gpu_starts"), "1");
}

TEST(TraceAssemblerTest, DroppedRecordsAreReported) {
  FakeKernelSource source;
  ASSERT_TRUE(source.Start().ok());
  OpScript s(&source);
  s.Begin("aten::add", kFwd, W + 1);
  s.Kernel("add", W + 2, W + 10, W + 70);
  s.End(kFwd, W + 3);
  source.set_dropped(12);
  ActivityRecords records;
  ASSERT_TRUE(source.Stop(&records).ok());
  Trace t;
  ASSERT_TRUE(AssembleTrace(s.ops(), records, Window(W, W + 100), &t).ok());
  EXPECT_EQ(t.metadata.at("agent.dropped_records"), "12");
}

TEST(TraceAssemblerTest, RejectsInconsistentInput) {
  Trace t;
  ActivityRecords one_kernel;
  one_kernel.kernels.push_back(KernelRecord{});
  one_kernel.kernels[0].start_ns = W + 1;
  one_kernel.kernels[0].end_ns = W + 2;

  Status st = AssembleTrace({}, one_kernel, Window(W, W), &t);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("window"), std::string::npos) << st.message();

  OpEvent a;
  a.id = 3;
  a.name = "aten::mm";
  a.start_ns = W + 1;
  a.end_ns = W + 2;
  OpEvent b = a;
  st = AssembleTrace({a, b}, one_kernel, Window(W, W + 10), &t);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("duplicate id 3"), std::string::npos) << st.message();

  b.id = 4;
  b.parent_id = 9;
  st = AssembleTrace({a, b}, one_kernel, Window(W, W + 10), &t);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("op event 1 (\"aten::mm\"): parent_id 9"), std::string::npos)
      << st.message();

  OpEvent backwards = a;
  backwards.end_ns = a.start_ns - 1;
  st = AssembleTrace({backwards}, one_kernel, Window(W, W + 10), &t);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);

  ActivityRecords bad = one_kernel;
  bad.kernels[0].end_ns = bad.kernels[0].start_ns - 5;
  st = AssembleTrace({a}, bad, Window(W, W + 10), &t);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("kernel record 0"), std::string::npos);

  st = AssembleTrace({a}, ActivityRecords(), Window(W, W + 10), &t);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("no GPU work"), std::string::npos);

  st = AssembleTrace({a}, one_kernel, Window(W, W + 10), nullptr);
  EXPECT_FALSE(st.ok());
}

// A forward op with a nested op, a forward op the recorder took no readings
// around, the first one's backward node inside an engine range and an
// unlinked AccumulateGrad, each top-level range with allocator readings.
class PassMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(source_.Start().ok());
    OpScript s(&source_);
    const uint64_t linear = s.Begin("aten::linear", kFwd, W + 10, 5);
    s.SetMemory(linear, 1000, 1500, 1600);
    // Nested: not a pass of its own, whatever it carries.
    const uint64_t addmm = s.Begin("aten::addmm", kFwd, W + 11, 5);
    s.SetMemory(addmm, 1100, 1400, 1600);
    s.Kernel("gemm", W + 12, W + 100, W + 200);
    s.End(kFwd, W + 13);
    s.End(kFwd, W + 14);

    s.Begin("aten::add", kFwd, W + 20);  // no readings
    s.Kernel("add", W + 21, W + 200, W + 250);
    s.End(kFwd, W + 22);

    const uint64_t engine =
        s.Begin("autograd::engine::evaluate_function: AddmmBackward0", kBwd, W + 300);
    s.SetMemory(engine, 1500, 1300, 2100);
    const uint64_t node = s.Begin("AddmmBackward0", kBwd, W + 301, 5, true, kFwd);
    s.SetMemory(node, 1, 2, 3);
    s.Kernel("gemm_bwd", W + 302, W + 400, W + 500);
    s.End(kBwd, W + 303);
    s.End(kBwd, W + 304);

    const uint64_t acc = s.Begin(
        "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", kBwd, W + 600);
    s.SetMemory(acc, 1300, 1300, 2100);
    s.Begin("torch::autograd::AccumulateGrad", kBwd, W + 601, -1, true, kFwd);
    s.Kernel("accum", W + 602, W + 700, W + 750);
    s.End(kBwd, W + 603);
    s.End(kBwd, W + 604);

    ops_ = s.ops();
    ASSERT_TRUE(source_.Stop(&records_).ok());
    options_ = Window(W, W + 1000);
    options_.memory = MemoryUsage{};
    options_.memory->allocated_bytes_at_start = 1000;
    options_.memory->peak_allocated_bytes = 2100;
    options_.memory->source = "recorded";
  }

  Trace Assemble(const std::vector<OpEvent>& ops, const AssemblyOptions& o) {
    Trace t;
    const Status st = AssembleTrace(ops, records_, o, &t);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return t;
  }

  FakeKernelSource source_;
  std::vector<OpEvent> ops_;
  ActivityRecords records_;
  AssemblyOptions options_;
};

void ExpectPass(const PassMemory& p, uint32_t operation, bool backward, int64_t before,
                int64_t after, int64_t peak) {
  EXPECT_EQ(p.operation, operation);
  EXPECT_EQ(p.backward, backward);
  EXPECT_EQ(p.allocated_bytes_before, before);
  EXPECT_EQ(p.allocated_bytes_after, after);
  EXPECT_EQ(p.peak_allocated_bytes_after, peak);
}

TEST_F(PassMemoryTest, OneEntryPerReadTopLevelRangeInStartOrder) {
  const Trace t = Assemble(ops_, options_);
  ASSERT_EQ(t.operations.size(), 3u);
  EXPECT_EQ(t.operations[0].name, "aten::linear");
  EXPECT_EQ(t.operations[1].name, "aten::add");
  EXPECT_EQ(t.operations[2].name, "torch::autograd::AccumulateGrad");
  ASSERT_TRUE(t.memory.has_value());
  EXPECT_EQ(t.memory->allocated_bytes_at_start, 1000);  // the options' fields stay
  EXPECT_EQ(t.memory->source, "recorded");
  ASSERT_EQ(t.memory->passes.size(), 3u);
  {
    SCOPED_TRACE("aten::linear forward");
    ExpectPass(t.memory->passes[0], 0, false, 1000, 1500, 1600);
  }
  {
    SCOPED_TRACE("AddmmBackward0, linked into aten::linear");
    ExpectPass(t.memory->passes[1], 0, true, 1500, 1300, 2100);
  }
  {
    SCOPED_TRACE("AccumulateGrad, an operation of its own");
    ExpectPass(t.memory->passes[2], 2, true, 1300, 1300, 2100);
  }

  // The order is the ranges' start, not the order events are handed over.
  const std::vector<OpEvent> reversed(ops_.rbegin(), ops_.rend());
  const Trace r = Assemble(reversed, options_);
  ASSERT_TRUE(r.memory.has_value());
  ASSERT_EQ(r.memory->passes.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const PassMemory& a = t.memory->passes[i];
    ExpectPass(r.memory->passes[i], a.operation, a.backward, a.allocated_bytes_before,
               a.allocated_bytes_after, a.peak_allocated_bytes_after);
  }
}

TEST_F(PassMemoryTest, RangesWithoutAllReadingsAreSkipped) {
  for (OpEvent& e : ops_) {
    // The backward range lost its peak: skipped like aten::add, which has
    // none at all.
    if (e.name == "autograd::engine::evaluate_function: AddmmBackward0") {
      e.peak_allocated_bytes_after = -1;
    }
  }
  const Trace t = Assemble(ops_, options_);
  ASSERT_TRUE(t.memory.has_value());
  ASSERT_EQ(t.memory->passes.size(), 2u);
  ExpectPass(t.memory->passes[0], 0, false, 1000, 1500, 1600);
  ExpectPass(t.memory->passes[1], 2, true, 1300, 1300, 2100);

  for (OpEvent& e : ops_) {
    e.allocated_bytes_before = e.allocated_bytes_after = e.peak_allocated_bytes_after = -1;
  }
  const Trace none = Assemble(ops_, options_);
  ASSERT_TRUE(none.memory.has_value());  // the region's memory all the same
  EXPECT_TRUE(none.memory->passes.empty());
}

TEST_F(PassMemoryTest, NoMemoryUsageWithoutTheRegionsMemory) {
  options_.memory.reset();
  const Trace t = Assemble(ops_, options_);
  EXPECT_EQ(t.operations.size(), 3u);
  EXPECT_FALSE(t.memory.has_value());
}

TEST(UnionLengthTest, MergesOverlapsAndTouchingIntervals) {
  EXPECT_EQ(UnionLength({}), 0);
  EXPECT_EQ(UnionLength({{0, 10}}), 10);
  EXPECT_EQ(UnionLength({{0, 10}, {20, 25}}), 15);
  EXPECT_EQ(UnionLength({{0, 10}, {5, 15}}), 15);
  EXPECT_EQ(UnionLength({{0, 10}, {10, 20}}), 20);
  EXPECT_EQ(UnionLength({{0, 100}, {10, 20}, {30, 40}}), 100);
  EXPECT_EQ(UnionLength({{50, 60}, {0, 10}, {5, 55}}), 60);
  EXPECT_EQ(UnionLength({{0, 0}, {3, 3}}), 0);
}

TEST(BusyPerWindowTest, UnionOfTheActivitiesStartingInEachWindow) {
  ActivityRecords r;
  KernelRecord k;
  for (auto [start, end] : std::vector<std::pair<int64_t, int64_t>>{
           {105, 120}, {110, 130}, {210, 215}, {90, 99}, {400, 410}}) {
    k.start_ns = start;
    k.end_ns = end;
    r.kernels.push_back(k);
  }
  MemoryRecord m;
  m.start_ns = 220;
  m.end_ns = 230;
  r.memory.push_back(m);
  std::vector<int64_t> busy;
  ASSERT_TRUE(BusyPerWindow(r, {100, 200, 300}, &busy).ok());
  // [105,130) in the first; [210,215) + [220,230) in the second; the
  // records before the first and after the last boundary are outside.
  EXPECT_EQ(busy, (std::vector<int64_t>{25, 15}));
  ASSERT_TRUE(BusyPerWindow(r, {100}, &busy).ok());
  EXPECT_TRUE(busy.empty());
  const Status st = BusyPerWindow(r, {100, 300, 200}, &busy);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("boundary 2"), std::string::npos);
}

TEST(ResolveLaunchesTest, EarliestApiCallAndExternalId) {
  ActivityRecords r;
  KernelRecord k;
  k.correlation_id = 5;
  r.kernels.push_back(k);
  MemoryRecord m;
  m.correlation_id = 6;
  r.memory.push_back(m);
  r.api_calls.push_back(ApiRecord{"cuLaunchKernel", 120, 130, 5, 1});
  r.api_calls.push_back(ApiRecord{"cudaLaunchKernel", 100, 140, 5, 1});
  r.external_correlations.push_back(ExternalCorrelation{5, 77});
  ResolveLaunches(&r);
  EXPECT_TRUE(r.kernels[0].has_launch_time);
  EXPECT_EQ(r.kernels[0].launch_ns, 100);
  EXPECT_EQ(r.kernels[0].external_id, 77u);
  EXPECT_FALSE(r.memory[0].has_launch_time);  // no API record for 6
  EXPECT_EQ(r.memory[0].external_id, 0u);
}

}  // namespace
}  // namespace agent
}  // namespace habitat
