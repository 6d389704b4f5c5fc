#include "agent/capture/wire_format.h"

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "agent/capture/fake_kernel_source.h"
#include "agent/capture/test_script.h"
#include "agent/capture/trace_assembler.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gtest/gtest.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {
namespace agent {
namespace {

namespace pb = ::habitat::v1;

Kernel FullKernel(const std::string& name, int64_t base) {
  const uint64_t u = static_cast<uint64_t>(base);
  Kernel k;
  k.name = name;
  k.grid = {65536, 3, 2};
  k.block = {128, 4, 2};
  k.registers_per_thread = 255;
  k.static_shared_memory_bytes = 48 * 1024;
  k.dynamic_shared_memory_bytes = 180 * 1024;
  k.duration_ns = base + 1;
  k.counters = KernelCounters{
      u + 10, u + 11, u + 12, u + 13, u + 14, u + 15, std::numeric_limits<uint64_t>::max()};
  k.start_ns = base + 2;
  k.launch_ns = -(base + 3);  // launch before the iteration start
  k.has_launch_time = true;
  k.stream = 4000000000u;
  k.correlation_id = (uint64_t{1} << 40) + base;
  return k;
}

// Every field of trace.proto set, with values that exercise the encoding:
// negative int64, max uint64, oneof members at their default, UTF-8.
Trace FullTrace() {
  Trace t;
  t.format_version = 1;
  t.origin = {"NVIDIA H100 80GB HBM3", "H100-SXM", 9,           0, 132,
              uint64_t{85} << 30,      50u << 20,  "580.159.04"};
  t.frameworks = {"2.11.0+cu130", "13.0", "91900", "0.1.0"};
  t.model_name = "résnet50 – test";
  t.batch_size = 64;
  t.precision = Precision::kAmpBf16;

  Operation conv;
  conv.name = "aten::conv2d";
  Argument tensor;
  tensor.name = "0";
  tensor.kind = Argument::Kind::kTensor;
  tensor.tensor = {{64, 3, 224, 224}, "c10::BFloat16"};
  Argument empty_tensor;  // a 0-d tensor: shape empty, dtype set
  empty_tensor.name = "1";
  empty_tensor.kind = Argument::Kind::kTensor;
  empty_tensor.tensor = {{}, "float"};
  Argument scalar_zero;
  scalar_zero.name = "2";
  scalar_zero.kind = Argument::Kind::kScalar;
  scalar_zero.scalar = 0.0;
  Argument scalar;
  scalar.name = "3";
  scalar.kind = Argument::Kind::kScalar;
  scalar.scalar = -0.125;
  Argument integer_zero;
  integer_zero.name = "4";
  integer_zero.kind = Argument::Kind::kInteger;
  integer_zero.integer = 0;
  Argument integer;
  integer.name = "5";
  integer.kind = Argument::Kind::kInteger;
  integer.integer = -7;
  Argument boolean_false;
  boolean_false.name = "6";
  boolean_false.kind = Argument::Kind::kBoolean;
  boolean_false.boolean = false;
  Argument text;
  text.name = "7";
  text.kind = Argument::Kind::kText;
  text.text = "mean";
  Argument empty_text;
  empty_text.name = "8";
  empty_text.kind = Argument::Kind::kText;
  Argument ints;
  ints.name = "9";
  ints.kind = Argument::Kind::kIntegers;
  ints.integers = {1, -1, 0, int64_t{1} << 62};
  Argument none;
  none.name = "10";
  none.kind = Argument::Kind::kNone;
  Argument empty_list;
  empty_list.name = "";
  empty_list.kind = Argument::Kind::kIntegers;
  conv.arguments = {tensor,        empty_tensor, scalar_zero, scalar, integer_zero, integer,
                    boolean_false, text,         empty_text,  ints,   none,         empty_list};
  conv.forward.time_ns = 1234;
  conv.forward.kernels = {FullKernel("fwd", 100), FullKernel("fwd2", 200)};
  MemoryActivity mem;
  mem.kind = MemoryKind::kMemcpyDtoD;
  mem.bytes = uint64_t{1} << 33;
  mem.duration_ns = 55;
  mem.start_ns = 66;
  mem.launch_ns = -77;
  mem.has_launch_time = true;
  mem.stream = 9;
  conv.forward.memory = {mem};
  conv.forward.recorded_name = "aten::conv2d";
  conv.forward.rerun_time_ns = int64_t{1} << 35;  // a multi-byte varint
  Pass backward;
  backward.time_ns = 999;
  backward.kernels = {FullKernel("bwd", 300)};
  backward.recorded_name = "ConvolutionBackward0";
  backward.rerun_time_ns = 1;
  backward.batch_reruns = {{16, 700}, {32, 999}, {128, int64_t{1} << 33}};
  conv.backward = backward;
  conv.sequence_number = 12345;
  conv.cpu_start_ns = 10;
  conv.cpu_duration_ns = 20;

  Operation acc;  // empty forward, empty backward, sequence number -1
  acc.name = "torch::autograd::AccumulateGrad";
  acc.backward = Pass();
  acc.sequence_number = -1;
  acc.gradient_producer = 0;  // written although 0: it has presence

  Operation plain;  // no backward at all
  plain.name = "aten::add_";
  plain.sequence_number = -1;
  t.operations = {conv, acc, plain};
  t.iteration_wall_ns = int64_t{5} << 40;
  t.iteration_gpu_busy_ns = 4242;
  Kernel bare;  // only a name: everything else default
  bare.name = "bare";
  t.unattributed_kernels = {FullKernel("stray", 400), bare};
  t.host_events = {{"cudaDeviceSynchronize", 5, 6}, {"cudaMemcpyAsync", 7, 8}};
  t.source = "habitat-agent";
  t.metadata = {{"agent.kernels", "3"}, {"empty", ""}, {"", "no key"}};
  // Optional fields holding their defaults: present all the same.
  MathSettings math;
  math.matmul_tf32 = false;
  math.cudnn_tf32 = true;
  math.float32_matmul_precision = "highest";
  math.autocast_dtype = "";
  math.source = "recorded";
  t.math = math;
  MemoryUsage memory;
  memory.allocated_bytes_at_start = 0;  // present although 0
  memory.peak_allocated_bytes = int64_t{70} << 30;
  memory.peak_reserved_bytes = std::numeric_limits<int64_t>::max();
  memory.source = "recorded";
  memory.passes = {
      {0, false, int64_t{12} << 30, (int64_t{12} << 30) + 4096, int64_t{13} << 30},
      {0, true, 0, 0, 0},  // backward with every byte count 0: only field 2
      {2, false, 512, 512, std::numeric_limits<int64_t>::max()},
      {4000000000u, true, 1, 0, 1},
  };
  t.memory = memory;
  t.modules = {{"", "GPT2LMHeadModel", 0},
               {"transformer.h.0", "GPT2Block", int64_t{50} << 20},
               {"transformer.wte", "Embed\xc3\xa9", std::numeric_limits<int64_t>::max()}};
  return t;
}

void ExpectKernel(const pb::Kernel& k, const std::string& name, int64_t base) {
  SCOPED_TRACE(name);
  EXPECT_EQ(k.name(), name);
  EXPECT_EQ(k.grid().x(), 65536u);
  EXPECT_EQ(k.grid().y(), 3u);
  EXPECT_EQ(k.grid().z(), 2u);
  EXPECT_EQ(k.block().x(), 128u);
  EXPECT_EQ(k.block().y(), 4u);
  EXPECT_EQ(k.block().z(), 2u);
  EXPECT_EQ(k.registers_per_thread(), 255u);
  EXPECT_EQ(k.static_shared_memory_bytes(), 48u * 1024);
  EXPECT_EQ(k.dynamic_shared_memory_bytes(), 180u * 1024);
  EXPECT_EQ(k.duration_ns(), base + 1);
  ASSERT_TRUE(k.has_counters());
  EXPECT_EQ(k.counters().dram_read_bytes(), static_cast<uint64_t>(base + 10));
  EXPECT_EQ(k.counters().dram_write_bytes(), static_cast<uint64_t>(base + 11));
  EXPECT_EQ(k.counters().flop_fp64(), static_cast<uint64_t>(base + 12));
  EXPECT_EQ(k.counters().flop_fp32(), static_cast<uint64_t>(base + 13));
  EXPECT_EQ(k.counters().flop_fp16(), static_cast<uint64_t>(base + 14));
  EXPECT_EQ(k.counters().flop_bf16(), static_cast<uint64_t>(base + 15));
  EXPECT_EQ(k.counters().flop_tensor(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(k.start_ns(), base + 2);
  EXPECT_EQ(k.launch_ns(), -(base + 3));
  EXPECT_TRUE(k.has_launch_time());
  EXPECT_EQ(k.stream(), 4000000000u);
  EXPECT_EQ(k.correlation_id(), (uint64_t{1} << 40) + base);
}

TEST(WireFormatTest, EveryFieldParsesBackWithTheGeneratedClass) {
  const std::string bytes = SerializeTrace(FullTrace());
  pb::Trace t;
  ASSERT_TRUE(t.ParseFromString(bytes));

  EXPECT_EQ(t.format_version(), 1u);
  EXPECT_EQ(t.origin().name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t.origin().device_id(), "H100-SXM");
  EXPECT_EQ(t.origin().compute_capability_major(), 9u);
  EXPECT_EQ(t.origin().compute_capability_minor(), 0u);
  EXPECT_EQ(t.origin().sm_count(), 132u);
  EXPECT_EQ(t.origin().memory_bytes(), uint64_t{85} << 30);
  EXPECT_EQ(t.origin().l2_cache_bytes(), 50u << 20);
  EXPECT_EQ(t.origin().driver_version(), "580.159.04");
  EXPECT_EQ(t.frameworks().torch(), "2.11.0+cu130");
  EXPECT_EQ(t.frameworks().cuda(), "13.0");
  EXPECT_EQ(t.frameworks().cudnn(), "91900");
  EXPECT_EQ(t.frameworks().habitat(), "0.1.0");
  EXPECT_EQ(t.model_name(), "résnet50 – test");
  EXPECT_EQ(t.batch_size(), 64u);
  EXPECT_EQ(t.precision(), pb::PRECISION_AMP_BF16);
  EXPECT_EQ(t.iteration_wall_ns(), int64_t{5} << 40);
  EXPECT_EQ(t.iteration_gpu_busy_ns(), 4242);
  EXPECT_EQ(t.source(), "habitat-agent");

  ASSERT_EQ(t.operations_size(), 3);
  const pb::Operation& conv = t.operations(0);
  EXPECT_EQ(conv.name(), "aten::conv2d");
  EXPECT_EQ(conv.sequence_number(), 12345);
  EXPECT_EQ(conv.cpu_start_ns(), 10);
  EXPECT_EQ(conv.cpu_duration_ns(), 20);
  ASSERT_EQ(conv.arguments_size(), 12);
  const auto& args = conv.arguments();
  EXPECT_EQ(args[0].name(), "0");
  ASSERT_EQ(args[0].value_case(), pb::Argument::kTensor);
  EXPECT_EQ(std::vector<int64_t>(args[0].tensor().shape().begin(), args[0].tensor().shape().end()),
            (std::vector<int64_t>{64, 3, 224, 224}));
  EXPECT_EQ(args[0].tensor().dtype(), "c10::BFloat16");
  ASSERT_EQ(args[1].value_case(), pb::Argument::kTensor);
  EXPECT_EQ(args[1].tensor().shape_size(), 0);
  EXPECT_EQ(args[1].tensor().dtype(), "float");
  ASSERT_EQ(args[2].value_case(), pb::Argument::kScalar);
  EXPECT_EQ(args[2].scalar(), 0.0);
  ASSERT_EQ(args[3].value_case(), pb::Argument::kScalar);
  EXPECT_EQ(args[3].scalar(), -0.125);
  ASSERT_EQ(args[4].value_case(), pb::Argument::kInteger);
  EXPECT_EQ(args[4].integer(), 0);
  ASSERT_EQ(args[5].value_case(), pb::Argument::kInteger);
  EXPECT_EQ(args[5].integer(), -7);
  ASSERT_EQ(args[6].value_case(), pb::Argument::kBoolean);
  EXPECT_FALSE(args[6].boolean());
  ASSERT_EQ(args[7].value_case(), pb::Argument::kText);
  EXPECT_EQ(args[7].text(), "mean");
  ASSERT_EQ(args[8].value_case(), pb::Argument::kText);
  EXPECT_EQ(args[8].text(), "");
  ASSERT_EQ(args[9].value_case(), pb::Argument::kIntegers);
  EXPECT_EQ(
      std::vector<int64_t>(args[9].integers().values().begin(), args[9].integers().values().end()),
      (std::vector<int64_t>{1, -1, 0, int64_t{1} << 62}));
  ASSERT_EQ(args[10].value_case(), pb::Argument::kNone);
  EXPECT_TRUE(args[10].none());
  EXPECT_EQ(args[11].name(), "");
  ASSERT_EQ(args[11].value_case(), pb::Argument::kIntegers);
  EXPECT_EQ(args[11].integers().values_size(), 0);

  ASSERT_TRUE(conv.has_forward());
  EXPECT_EQ(conv.forward().time_ns(), 1234);
  EXPECT_EQ(conv.forward().recorded_name(), "aten::conv2d");
  EXPECT_EQ(conv.forward().rerun_time_ns(), int64_t{1} << 35);
  ASSERT_EQ(conv.forward().kernels_size(), 2);
  ExpectKernel(conv.forward().kernels(0), "fwd", 100);
  ExpectKernel(conv.forward().kernels(1), "fwd2", 200);
  ASSERT_EQ(conv.forward().memory_size(), 1);
  const pb::MemoryActivity& mem = conv.forward().memory(0);
  EXPECT_EQ(mem.kind(), pb::MemoryActivity::KIND_MEMCPY_DTOD);
  EXPECT_EQ(mem.bytes(), uint64_t{1} << 33);
  EXPECT_EQ(mem.duration_ns(), 55);
  EXPECT_EQ(mem.start_ns(), 66);
  EXPECT_EQ(mem.launch_ns(), -77);
  EXPECT_TRUE(mem.has_launch_time());
  EXPECT_EQ(mem.stream(), 9u);
  ASSERT_TRUE(conv.has_backward());
  EXPECT_EQ(conv.backward().time_ns(), 999);
  EXPECT_EQ(conv.backward().recorded_name(), "ConvolutionBackward0");
  EXPECT_EQ(conv.backward().rerun_time_ns(), 1);
  ASSERT_EQ(conv.backward().batch_reruns_size(), 3);
  EXPECT_EQ(conv.backward().batch_reruns(0).batch_size(), 16u);
  EXPECT_EQ(conv.backward().batch_reruns(0).rerun_time_ns(), 700);
  EXPECT_EQ(conv.backward().batch_reruns(2).batch_size(), 128u);
  EXPECT_EQ(conv.backward().batch_reruns(2).rerun_time_ns(), int64_t{1} << 33);
  EXPECT_EQ(conv.forward().batch_reruns_size(), 0);
  ASSERT_EQ(conv.backward().kernels_size(), 1);
  ExpectKernel(conv.backward().kernels(0), "bwd", 300);

  const pb::Operation& acc = t.operations(1);
  EXPECT_EQ(acc.name(), "torch::autograd::AccumulateGrad");
  EXPECT_TRUE(acc.has_forward());
  EXPECT_TRUE(acc.has_backward());  // present although empty
  EXPECT_EQ(acc.backward().kernels_size(), 0);
  EXPECT_EQ(acc.backward().rerun_time_ns(), 0);  // not measured: not written
  EXPECT_EQ(acc.sequence_number(), -1);
  EXPECT_EQ(acc.arguments_size(), 0);
  EXPECT_TRUE(acc.has_gradient_producer());
  EXPECT_EQ(acc.gradient_producer(), 0u);
  const pb::Operation& plain = t.operations(2);
  EXPECT_TRUE(plain.has_forward());
  EXPECT_FALSE(plain.has_backward());
  EXPECT_FALSE(plain.has_gradient_producer());

  ASSERT_EQ(t.unattributed_kernels_size(), 2);
  ExpectKernel(t.unattributed_kernels(0), "stray", 400);
  const pb::Kernel& bare = t.unattributed_kernels(1);
  EXPECT_EQ(bare.name(), "bare");
  EXPECT_FALSE(bare.has_counters());
  EXPECT_FALSE(bare.has_launch_time());
  EXPECT_EQ(bare.grid().x(), 0u);
  ASSERT_EQ(t.host_events_size(), 2);
  EXPECT_EQ(t.host_events(0).name(), "cudaDeviceSynchronize");
  EXPECT_EQ(t.host_events(0).cpu_start_ns(), 5);
  EXPECT_EQ(t.host_events(0).cpu_duration_ns(), 6);
  EXPECT_EQ(t.host_events(1).name(), "cudaMemcpyAsync");
  EXPECT_EQ(t.host_events(1).cpu_start_ns(), 7);
  EXPECT_EQ(t.host_events(1).cpu_duration_ns(), 8);
  ASSERT_EQ(t.metadata_size(), 3);
  EXPECT_EQ(t.metadata().at("agent.kernels"), "3");
  EXPECT_EQ(t.metadata().at("empty"), "");
  EXPECT_EQ(t.metadata().at(""), "no key");
  ASSERT_TRUE(t.has_math());
  ASSERT_TRUE(t.math().has_matmul_tf32());
  EXPECT_FALSE(t.math().matmul_tf32());
  ASSERT_TRUE(t.math().has_cudnn_tf32());
  EXPECT_TRUE(t.math().cudnn_tf32());
  EXPECT_EQ(t.math().float32_matmul_precision(), "highest");
  ASSERT_TRUE(t.math().has_autocast_dtype());
  EXPECT_EQ(t.math().autocast_dtype(), "");
  EXPECT_EQ(t.math().source(), "recorded");
  ASSERT_TRUE(t.has_memory());
  ASSERT_TRUE(t.memory().has_allocated_bytes_at_start());
  EXPECT_EQ(t.memory().allocated_bytes_at_start(), 0);
  EXPECT_EQ(t.memory().peak_allocated_bytes(), int64_t{70} << 30);
  EXPECT_EQ(t.memory().peak_reserved_bytes(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(t.memory().source(), "recorded");
  ASSERT_EQ(t.memory().passes_size(), 4);
  const pb::PassMemory& forward = t.memory().passes(0);
  EXPECT_EQ(forward.operation(), 0u);
  EXPECT_FALSE(forward.backward());
  EXPECT_EQ(forward.allocated_bytes_before(), int64_t{12} << 30);
  EXPECT_EQ(forward.allocated_bytes_after(), (int64_t{12} << 30) + 4096);
  EXPECT_EQ(forward.peak_allocated_bytes_after(), int64_t{13} << 30);
  const pb::PassMemory& zero = t.memory().passes(1);
  EXPECT_EQ(zero.operation(), 0u);
  EXPECT_TRUE(zero.backward());
  EXPECT_EQ(zero.allocated_bytes_before(), 0);
  EXPECT_EQ(zero.allocated_bytes_after(), 0);
  EXPECT_EQ(zero.peak_allocated_bytes_after(), 0);
  EXPECT_EQ(zero.ByteSizeLong(), 2u);  // proto3 defaults are not written
  const pb::PassMemory& kept = t.memory().passes(2);
  EXPECT_EQ(kept.operation(), 2u);
  EXPECT_FALSE(kept.backward());
  EXPECT_EQ(kept.allocated_bytes_before(), 512);
  EXPECT_EQ(kept.allocated_bytes_after(), 512);
  EXPECT_EQ(kept.peak_allocated_bytes_after(), std::numeric_limits<int64_t>::max());
  const pb::PassMemory& last = t.memory().passes(3);
  EXPECT_EQ(last.operation(), 4000000000u);
  EXPECT_TRUE(last.backward());
  EXPECT_EQ(last.allocated_bytes_before(), 1);
  EXPECT_EQ(last.allocated_bytes_after(), 0);
  EXPECT_EQ(last.peak_allocated_bytes_after(), 1);
  ASSERT_EQ(t.modules_size(), 3);
  EXPECT_EQ(t.modules(0).path(), "");
  EXPECT_EQ(t.modules(0).class_name(), "GPT2LMHeadModel");
  EXPECT_EQ(t.modules(0).parameter_bytes(), 0);
  EXPECT_EQ(t.modules(1).path(), "transformer.h.0");
  EXPECT_EQ(t.modules(1).parameter_bytes(), int64_t{50} << 20);
  EXPECT_EQ(t.modules(2).class_name(), "Embed\xc3\xa9");
  EXPECT_EQ(t.modules(2).parameter_bytes(), std::numeric_limits<int64_t>::max());
}

TEST(WireFormatTest, MathSettingsPresenceFollowsTheModel) {
  Trace t;
  pb::Trace parsed;
  ASSERT_TRUE(parsed.ParseFromString(SerializeTrace(t)));
  EXPECT_FALSE(parsed.has_math());  // not known: not written

  MathSettings inferred;  // only what an import could tell
  inferred.matmul_tf32 = true;
  inferred.autocast_dtype = "bf16";
  inferred.source = "inferred";
  t.math = inferred;
  const std::string ours = SerializeTrace(t);
  ASSERT_TRUE(parsed.ParseFromString(ours));
  ASSERT_TRUE(parsed.has_math());
  EXPECT_TRUE(parsed.math().matmul_tf32());
  EXPECT_FALSE(parsed.math().has_cudnn_tf32());
  EXPECT_EQ(parsed.math().float32_matmul_precision(), "");
  EXPECT_EQ(parsed.math().autocast_dtype(), "bf16");
  EXPECT_EQ(parsed.math().source(), "inferred");
  std::string theirs;
  ASSERT_TRUE(parsed.SerializeToString(&theirs));
  EXPECT_TRUE(ours == theirs);

  t.math = MathSettings();  // present and empty
  ASSERT_TRUE(parsed.ParseFromString(SerializeTrace(t)));
  EXPECT_TRUE(parsed.has_math());
  EXPECT_FALSE(parsed.math().has_matmul_tf32());
  EXPECT_FALSE(parsed.math().has_autocast_dtype());
}

TEST(WireFormatTest, MemoryUsagePresenceFollowsTheModel) {
  Trace t;
  pb::Trace parsed;
  ASSERT_TRUE(parsed.ParseFromString(SerializeTrace(t)));
  EXPECT_FALSE(parsed.has_memory());  // not known: not written

  MemoryUsage imported;  // only what a profile's memory events tell
  imported.peak_allocated_bytes = 3 << 20;
  imported.peak_reserved_bytes = 4 << 20;
  imported.source = "kineto";
  t.memory = imported;
  const std::string ours = SerializeTrace(t);
  ASSERT_TRUE(parsed.ParseFromString(ours));
  ASSERT_TRUE(parsed.has_memory());
  EXPECT_FALSE(parsed.memory().has_allocated_bytes_at_start());
  EXPECT_EQ(parsed.memory().peak_allocated_bytes(), 3 << 20);
  EXPECT_EQ(parsed.memory().peak_reserved_bytes(), 4 << 20);
  EXPECT_EQ(parsed.memory().source(), "kineto");
  std::string theirs;
  ASSERT_TRUE(parsed.SerializeToString(&theirs));
  EXPECT_TRUE(ours == theirs);

  t.memory = MemoryUsage();  // present and empty
  ASSERT_TRUE(parsed.ParseFromString(SerializeTrace(t)));
  EXPECT_TRUE(parsed.has_memory());
  EXPECT_FALSE(parsed.memory().has_peak_allocated_bytes());
}

// The generated code, serialising deterministically (map keys sorted),
// writes fields in number order; the hand-written bytes must be the same.
TEST(WireFormatTest, BytesEqualTheGeneratedSerialisation) {
  const std::string ours = SerializeTrace(FullTrace());
  pb::Trace parsed;
  ASSERT_TRUE(parsed.ParseFromString(ours));
  std::string theirs;
  {
    google::protobuf::io::StringOutputStream stream(&theirs);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    ASSERT_TRUE(parsed.SerializeToCodedStream(&coded));
  }
  EXPECT_EQ(ours.size(), theirs.size());
  EXPECT_TRUE(ours == theirs) << "hand-written bytes differ from protobuf's";
}

TEST(WireFormatTest, DefaultTraceHasOnlyItsAlwaysPresentMessages) {
  Trace t;
  t.format_version = 0;
  pb::Trace parsed;
  ASSERT_TRUE(parsed.ParseFromString(SerializeTrace(t)));
  EXPECT_TRUE(parsed.has_origin());
  EXPECT_TRUE(parsed.has_frameworks());
  EXPECT_EQ(parsed.operations_size(), 0);
  EXPECT_EQ(parsed.ByteSizeLong(), 4u);  // two empty submessages
}

TEST(WireFormatTest, AssembledTraceRoundTrips) {
  FakeKernelSource source;
  ASSERT_TRUE(source.Start().ok());
  OpScript s(&source);
  const uint64_t relu = s.Begin("aten::relu", 1, 110, 3);
  s.SetMemory(relu, 1000, 3000, 3000);
  s.Kernel("relu", 120, 200, 300);
  s.End(1, 130);
  const uint64_t node = s.Begin("ReluBackward0", 2, 400, 3, true, 1);
  s.SetMemory(node, 3000, 2000, 5000);
  s.Kernel("relu_bwd", 410, 500, 650);
  s.End(2, 420);
  ActivityRecords records;
  ASSERT_TRUE(source.Stop(&records).ok());
  AssemblyOptions o;
  o.window_start_ns = 100;
  o.window_end_ns = 1000;
  o.batch_size = 2;
  o.origin.name = "gpu";
  o.math = MathSettings{true, true, "high", "bf16", "recorded"};
  o.memory = MemoryUsage{1000, 5000, 8192, "recorded", {}};
  o.modules = {{"", "Net", 4096}};
  Trace trace;
  ASSERT_TRUE(AssembleTrace(s.ops(), records, o, &trace).ok());
  pb::Trace parsed;
  ASSERT_TRUE(parsed.ParseFromString(SerializeTrace(trace)));
  ASSERT_EQ(parsed.operations_size(), 1);
  EXPECT_EQ(parsed.operations(0).forward().kernels(0).name(), "relu");
  EXPECT_EQ(parsed.operations(0).forward().kernels(0).start_ns(), 100);
  EXPECT_EQ(parsed.operations(0).forward().kernels(0).launch_ns(), 20);
  EXPECT_EQ(parsed.operations(0).backward().kernels(0).name(), "relu_bwd");
  EXPECT_EQ(parsed.operations(0).backward().time_ns(), 150);
  EXPECT_EQ(parsed.operations(0).sequence_number(), 3);
  EXPECT_EQ(parsed.iteration_gpu_busy_ns(), 250);
  EXPECT_EQ(parsed.iteration_wall_ns(), 900);
  EXPECT_EQ(parsed.source(), "habitat-agent");
  EXPECT_EQ(parsed.metadata().at("agent.kernels"), "2");
  EXPECT_TRUE(parsed.math().matmul_tf32());
  EXPECT_EQ(parsed.math().float32_matmul_precision(), "high");
  EXPECT_EQ(parsed.math().autocast_dtype(), "bf16");
  EXPECT_EQ(parsed.math().source(), "recorded");
  EXPECT_EQ(parsed.memory().allocated_bytes_at_start(), 1000);
  EXPECT_EQ(parsed.memory().peak_allocated_bytes(), 5000);
  EXPECT_EQ(parsed.memory().peak_reserved_bytes(), 8192);
  EXPECT_EQ(parsed.memory().source(), "recorded");
  ASSERT_EQ(parsed.modules_size(), 1);
  EXPECT_EQ(parsed.modules(0).class_name(), "Net");
  EXPECT_EQ(parsed.modules(0).parameter_bytes(), 4096);
  ASSERT_EQ(parsed.memory().passes_size(), 2);
  EXPECT_EQ(parsed.memory().passes(0).operation(), 0u);
  EXPECT_FALSE(parsed.memory().passes(0).backward());
  EXPECT_EQ(parsed.memory().passes(0).allocated_bytes_before(), 1000);
  EXPECT_EQ(parsed.memory().passes(0).allocated_bytes_after(), 3000);
  EXPECT_EQ(parsed.memory().passes(0).peak_allocated_bytes_after(), 3000);
  EXPECT_EQ(parsed.memory().passes(1).operation(), 0u);
  EXPECT_TRUE(parsed.memory().passes(1).backward());
  EXPECT_EQ(parsed.memory().passes(1).allocated_bytes_before(), 3000);
  EXPECT_EQ(parsed.memory().passes(1).allocated_bytes_after(), 2000);
  EXPECT_EQ(parsed.memory().passes(1).peak_allocated_bytes_after(), 5000);
}

// Every field of `message`'s type and the types below it, by full name.
void CollectDeclared(const google::protobuf::Descriptor* message, std::set<std::string>* fields) {
  for (int i = 0; i < message->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = message->field(i);
    if (!fields->insert(field->full_name()).second) continue;
    if (field->message_type() != nullptr) CollectDeclared(field->message_type(), fields);
  }
}

// Every field set somewhere in `message`, by full name.
void CollectWritten(const google::protobuf::Message& message, std::set<std::string>* fields) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> set;
  reflection->ListFields(message, &set);
  for (const google::protobuf::FieldDescriptor* field : set) {
    fields->insert(field->full_name());
    if (field->message_type() == nullptr) continue;
    if (!field->is_repeated()) {
      CollectWritten(reflection->GetMessage(message, field), fields);
      continue;
    }
    for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
      CollectWritten(reflection->GetRepeatedMessage(message, field, i), fields);
    }
  }
}

// trace.proto fields that FullTrace, which sets everything the agent's data
// model holds, does not bring onto the wire: what the server reads that
// the agent never writes. A field added to trace.proto shows up here until
// the wire format writes it or it joins this list.
TEST(WireFormatTest, ListsTheTraceFieldsTheAgentDoesNotWrite) {
  const std::set<std::string> expected = {};  // today the agent writes every field
  Trace trace = FullTrace();
  trace.origin.compute_capability_minor = 1;  // FullTrace's 0 is not on the wire
  pb::Trace parsed;
  ASSERT_TRUE(parsed.ParseFromString(SerializeTrace(trace)));
  std::set<std::string> declared;
  CollectDeclared(pb::Trace::descriptor(), &declared);
  std::set<std::string> written;
  CollectWritten(parsed, &written);
  std::set<std::string> not_written;
  for (const std::string& field : declared) {
    if (written.count(field) == 0) not_written.insert(field);
  }
  std::string listing;
  for (const std::string& field : not_written) listing += "  " + field + "\n";
  EXPECT_EQ(not_written, expected) << "trace.proto fields the agent does not write:\n" << listing;
}

}  // namespace
}  // namespace agent
}  // namespace habitat
