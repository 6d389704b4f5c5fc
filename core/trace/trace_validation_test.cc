// Validation tests on a real captured trace, mutated one field at a time.
#include "core/trace/trace_validation.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

// Checks the rules that need no fixture; the fixture-based cases live in
// tests/core (they need the Kineto importer).
TEST(TraceValidationTest, EmptyTraceNamesTheMissingField) {
  v1::Trace trace;
  absl::Status status = ValidateTrace(trace);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("origin"), absl::string_view::npos) << status;
}

// A minimal valid trace: one operation with one kernel.
v1::Trace OneKernelTrace() {
  v1::Trace trace;
  trace.mutable_origin()->set_device_id("H100-SXM");
  trace.set_batch_size(1);
  v1::Operation* op = trace.add_operations();
  op->set_name("aten::add");
  op->mutable_forward()->set_time_ns(1000);
  v1::Kernel* kernel = op->mutable_forward()->add_kernels();
  kernel->set_name("k");
  for (v1::Dim3* d : {kernel->mutable_grid(), kernel->mutable_block()}) {
    d->set_x(1);
    d->set_y(1);
    d->set_z(1);
  }
  kernel->set_duration_ns(1000);
  return trace;
}

void ExpectInvalid(const v1::Trace& trace, absl::string_view field) {
  const absl::Status status = ValidateTrace(trace);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(field), absl::string_view::npos) << status;
}

TEST(TraceValidationTest, MinimalTraceIsValid) {
  EXPECT_TRUE(ValidateTrace(OneKernelTrace()).ok()) << ValidateTrace(OneKernelTrace());
}

// Found while fuzzing (docs/fuzzing.md): a start near INT64_MAX passed
// validation and overflowed int64 in the host replay (start + duration).
TEST(TraceValidationTest, TimeOffsetsAreBounded) {
  const int64_t far = TraceLimits().max_duration_ns + 1;
  v1::Trace trace = OneKernelTrace();
  trace.mutable_operations(0)->mutable_forward()->mutable_kernels(0)->set_start_ns(
      std::numeric_limits<int64_t>::max() - 10);
  ExpectInvalid(trace, "operations[0].forward.kernels[0].start_ns");

  trace = OneKernelTrace();
  trace.mutable_operations(0)->mutable_forward()->mutable_kernels(0)->set_launch_ns(-far);
  ExpectInvalid(trace, "operations[0].forward.kernels[0].launch_ns");
  // A launch shortly before the measured region is fine.
  trace.mutable_operations(0)->mutable_forward()->mutable_kernels(0)->set_launch_ns(-5);
  EXPECT_TRUE(ValidateTrace(trace).ok());

  trace = OneKernelTrace();
  v1::MemoryActivity* memory = trace.mutable_operations(0)->mutable_forward()->add_memory();
  memory->set_start_ns(-1);
  ExpectInvalid(trace, "operations[0].forward.memory[0].start_ns");

  trace = OneKernelTrace();
  trace.mutable_operations(0)->set_cpu_start_ns(far);
  ExpectInvalid(trace, "operations[0].cpu_start_ns");

  trace = OneKernelTrace();
  trace.add_host_events()->set_cpu_duration_ns(far);
  ExpectInvalid(trace, "host_events[0].cpu_duration_ns");
}

// rerun_time_ns (the op re-run alone, agent measure_ops) is checked like
// time_ns; a measured one is accepted.
TEST(TraceValidationTest, RerunTimesAreDurations) {
  v1::Trace trace = OneKernelTrace();
  trace.mutable_operations(0)->mutable_forward()->set_rerun_time_ns(1200);
  trace.mutable_operations(0)->mutable_backward()->set_rerun_time_ns(2400);
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);

  trace.mutable_operations(0)->mutable_backward()->set_rerun_time_ns(-1);
  ExpectInvalid(trace, "operations[0].backward.rerun_time_ns");

  trace = OneKernelTrace();
  trace.mutable_operations(0)->mutable_forward()->set_rerun_time_ns(TraceLimits().max_duration_ns +
                                                                    1);
  ExpectInvalid(trace, "operations[0].forward.rerun_time_ns");
}

// Each duration within its bound, but their sum is not: the predictor's
// sums of scaled times could overflow.
TEST(TraceValidationTest, BatchReRunsNameEachBatchOnceAndAreDurations) {
  v1::Trace trace = OneKernelTrace();
  v1::Pass* pass = trace.mutable_operations(0)->mutable_forward();
  for (uint32_t batch : {16u, 32u}) {
    v1::BatchRerun* rerun = pass->add_batch_reruns();
    rerun->set_batch_size(batch);
    rerun->set_rerun_time_ns(1000 * batch);
  }
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
  pass->mutable_batch_reruns(1)->set_batch_size(16);
  ExpectInvalid(trace, "operations[0].forward.batch_reruns[1].batch_size");
  pass->mutable_batch_reruns(1)->set_batch_size(0);
  ExpectInvalid(trace, "operations[0].forward.batch_reruns[1].batch_size");
  pass->mutable_batch_reruns(1)->set_batch_size(32);
  pass->mutable_batch_reruns(0)->set_rerun_time_ns(-1);
  ExpectInvalid(trace, "operations[0].forward.batch_reruns[0].rerun_time_ns");
  pass->mutable_batch_reruns(0)->set_rerun_time_ns(1);
  for (uint32_t batch = 64; batch < 64 + 15; ++batch) {
    pass->add_batch_reruns()->set_batch_size(batch);
  }
  ExpectInvalid(trace, "operations[0].forward.batch_reruns");
}

TEST(TraceValidationTest, TotalGpuTimeIsBounded) {
  const int64_t limit = TraceLimits().max_duration_ns;
  v1::Trace trace = OneKernelTrace();
  trace.mutable_operations(0)->mutable_forward()->mutable_kernels(0)->set_duration_ns(limit);
  EXPECT_TRUE(ValidateTrace(trace).ok());
  *trace.add_unattributed_kernels() = trace.operations(0).forward().kernels(0);
  ExpectInvalid(trace, "GPU time");
}

TEST(TraceValidationTest, MathSettingsTakeKnownValuesOnly) {
  v1::Trace trace = OneKernelTrace();
  v1::MathSettings* math = trace.mutable_math();
  math->set_matmul_tf32(true);
  math->set_cudnn_tf32(true);
  math->set_float32_matmul_precision("high");
  math->set_autocast_dtype("bf16");
  math->set_source("recorded");
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
  math->clear_autocast_dtype();
  math->clear_float32_matmul_precision();
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);

  math->set_float32_matmul_precision("HIGH");
  ExpectInvalid(trace, "math.float32_matmul_precision");
  math->set_float32_matmul_precision("medium");
  math->set_autocast_dtype("float16");
  ExpectInvalid(trace, "math.autocast_dtype");
  math->set_autocast_dtype("");  // present: no autocast
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
  math->set_source(std::string(65, 'x'));
  ExpectInvalid(trace, "math.source");
  math->set_source("inferred\n");
  ExpectInvalid(trace, "math.source");
}

TEST(TraceValidationTest, MemoryUsageIsNeverNegative) {
  v1::Trace trace = OneKernelTrace();
  v1::MemoryUsage* memory = trace.mutable_memory();
  memory->set_allocated_bytes_at_start(0);
  memory->set_peak_allocated_bytes(int64_t{70} << 30);
  memory->set_source("recorded");
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
  memory->set_peak_reserved_bytes(-1);
  ExpectInvalid(trace, "memory.peak_reserved_bytes");
  memory->clear_peak_reserved_bytes();
  memory->set_source("kineto\n");
  ExpectInvalid(trace, "memory.source");
}

TEST(TraceValidationTest, PassMemoryNamesAPassOfTheTraceAndIsNeverNegative) {
  v1::Trace trace = OneKernelTrace();
  v1::MemoryUsage* memory = trace.mutable_memory();
  memory->set_allocated_bytes_at_start(100);
  memory->set_peak_allocated_bytes(300);
  v1::PassMemory* pass = memory->add_passes();
  pass->set_operation(0);
  pass->set_allocated_bytes_before(100);
  pass->set_allocated_bytes_after(200);
  pass->set_peak_allocated_bytes_after(300);
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
  pass->set_operation(trace.operations_size());
  ExpectInvalid(trace, "memory.passes[0].operation");
  pass->set_operation(0);
  trace.mutable_operations(0)->clear_backward();
  pass->set_backward(true);
  ExpectInvalid(trace, "memory.passes[0].backward");
  pass->set_backward(false);
  pass->set_allocated_bytes_after(-1);
  ExpectInvalid(trace, "memory.passes[0].allocated_bytes_after");
  pass->set_allocated_bytes_after(200);
  for (int i = 0; i < 8; ++i) *memory->add_passes() = *pass;
  ExpectInvalid(trace, "memory.passes");
}

// The producer's backward ended before the accumulation began, and the
// operations are in the order they began: it is an earlier operation, never
// the accumulation itself or a later one.
TEST(TraceValidationTest, GradientProducerNamesAnEarlierOperation) {
  v1::Trace trace = OneKernelTrace();
  *trace.add_operations() = trace.operations(0);
  *trace.add_operations() = trace.operations(0);
  trace.mutable_operations(1)->set_name("torch::autograd::AccumulateGrad");
  trace.mutable_operations(1)->set_gradient_producer(0);
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
  trace.mutable_operations(1)->set_gradient_producer(1);  // itself
  ExpectInvalid(trace, "operations[1].gradient_producer");
  ExpectInvalid(trace, "an earlier operation");
  trace.mutable_operations(1)->set_gradient_producer(2);  // a later one
  ExpectInvalid(trace, "operations[1].gradient_producer");
  trace.mutable_operations(1)->set_gradient_producer(3);  // none at all
  ExpectInvalid(trace, "operations[1].gradient_producer");
  trace.mutable_operations(1)->clear_gradient_producer();
  trace.mutable_operations(0)->set_gradient_producer(0);  // the first, itself
  ExpectInvalid(trace, "operations[0].gradient_producer");
}

// An unknown enum value (open enums keep it) is a field we cannot read.
TEST(TraceValidationTest, MemoryActivityKindIsAKnownValue) {
  v1::Trace trace = OneKernelTrace();
  v1::MemoryActivity* memory = trace.mutable_operations(0)->mutable_forward()->add_memory();
  memory->set_kind(v1::MemoryActivity::KIND_MEMCPY_HTOD);
  memory->set_bytes(4096);
  memory->set_duration_ns(10);
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
  memory->set_kind(static_cast<v1::MemoryActivity::Kind>(99));
  ExpectInvalid(trace, "operations[0].forward.memory[0].kind");
  ExpectInvalid(trace, "99");
  memory->set_kind(static_cast<v1::MemoryActivity::Kind>(-1));
  ExpectInvalid(trace, "operations[0].forward.memory[0].kind");
}

// Kernels attributed to no operation are carried along by the predictor,
// not predicted: a trace of nothing else would be predicted at 0 ns.
TEST(TraceValidationTest, UnattributedKernelsAloneAreNotATrace) {
  v1::Trace trace = OneKernelTrace();
  *trace.add_unattributed_kernels() = trace.operations(0).forward().kernels(0);
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
  trace.clear_operations();
  ExpectInvalid(trace, "operations");
  ExpectInvalid(trace, "unattributed_kernels");
}

// The peak of an iteration is at least what was allocated when it began.
TEST(TraceValidationTest, PeakMemoryIsNotBelowTheStart) {
  v1::Trace trace = OneKernelTrace();
  v1::MemoryUsage* memory = trace.mutable_memory();
  memory->set_allocated_bytes_at_start(int64_t{8} << 30);
  memory->set_peak_allocated_bytes(int64_t{8} << 30);
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
  memory->set_peak_allocated_bytes((int64_t{8} << 30) - 1);
  ExpectInvalid(trace, "memory.peak_allocated_bytes");
  ExpectInvalid(trace, "memory.allocated_bytes_at_start");
  // Either alone is fine: nothing to compare.
  memory->clear_allocated_bytes_at_start();
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
}

// Every repeated field counts against a limit: 3,000,000 memory activities,
// host events or metadata entries used to be accepted, and unattributed
// kernels did not count toward max_total_kernels.
TEST(TraceValidationTest, EveryRepeatedFieldIsBounded) {
  TraceLimits small;
  small.max_memory_activities_per_pass = 2;
  small.max_total_kernels = 3;
  small.max_host_events = 2;
  small.max_metadata_entries = 2;
  small.max_argument_values = 2;
  auto expect_invalid = [&](const v1::Trace& trace, absl::string_view needle) {
    const absl::Status status = ValidateTrace(trace, small);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find(needle), absl::string_view::npos) << status;
  };
  ASSERT_TRUE(ValidateTrace(OneKernelTrace(), small).ok());

  v1::Trace trace = OneKernelTrace();
  for (int i = 0; i < 3; ++i) trace.mutable_operations(0)->mutable_forward()->add_memory();
  expect_invalid(trace, "max_memory_activities_per_pass");

  trace = OneKernelTrace();  // 1 kernel + 2 memory activities + 1 unattributed
  for (int i = 0; i < 2; ++i) trace.mutable_operations(0)->mutable_forward()->add_memory();
  ASSERT_TRUE(ValidateTrace(trace, small).ok());
  *trace.add_unattributed_kernels() = trace.operations(0).forward().kernels(0);
  expect_invalid(trace, "max_total_kernels");

  trace = OneKernelTrace();
  for (int i = 0; i < 3; ++i) trace.add_host_events()->set_name("cudaDeviceSynchronize");
  expect_invalid(trace, "max_host_events");

  trace = OneKernelTrace();
  for (int i = 0; i < 3; ++i) (*trace.mutable_metadata())[std::to_string(i)] = "x";
  expect_invalid(trace, "max_metadata_entries");

  small.max_modules = 2;
  trace = OneKernelTrace();
  for (int i = 0; i < 3; ++i) trace.add_modules()->set_class_name("Block");
  expect_invalid(trace, "max_modules");

  trace = OneKernelTrace();
  auto* values = trace.mutable_operations(0)->add_arguments()->mutable_integers();
  for (int i = 0; i < 3; ++i) values->add_values(i);
  expect_invalid(trace, "operations[0].arguments[0].integers");
}

// Free-form strings end up in tables and logs: no control characters.
TEST(TraceValidationTest, FreeFormStringsArePrintable) {
  v1::Trace trace = OneKernelTrace();
  (*trace.mutable_metadata())["note"] = "a\x1b[2Jb";
  ExpectInvalid(trace, "metadata[note]");
  trace = OneKernelTrace();
  trace.add_host_events()->set_name("sync\n");
  ExpectInvalid(trace, "host_events[0].name");
  trace = OneKernelTrace();
  trace.mutable_operations(0)->add_arguments()->set_text("\x07");
  ExpectInvalid(trace, "operations[0].arguments[0].text");
  trace = OneKernelTrace();
  trace.set_source("agent\r");
  ExpectInvalid(trace, "source");
  trace = OneKernelTrace();
  trace.add_modules()->set_class_name("Block\x1b[2J");
  ExpectInvalid(trace, "modules[0].class_name");
  trace = OneKernelTrace();
  trace.add_modules()->set_parameter_bytes(-1);
  ExpectInvalid(trace, "modules[0].parameter_bytes");
  trace = OneKernelTrace();
  trace.mutable_frameworks()->set_torch(std::string(300, '2'));
  ExpectInvalid(trace, "frameworks.torch");
  trace = OneKernelTrace();
  trace.set_model_name(
      "resnet\xE2\x80\xAE"
      "fp32");  // U+202E RIGHT-TO-LEFT OVERRIDE
  ExpectInvalid(trace, "bidirectional");
  trace = OneKernelTrace();
  trace.set_model_name("r\xC3\xA9seau \xE2\x80\x94 \xE2\x80\xA6");  // é, em dash, ellipsis
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
}

// Line and paragraph separators break a log line or a table row like a
// newline does; C1 controls are control characters; every Unicode
// Bidi_Control reorders what a terminal shows. Each is refused, naming the
// field and the code point.
TEST(TraceValidationTest, UnicodeSeparatorsAndBidiControlsAreRefused) {
  struct Case {
    const char* utf8;
    const char* code_point;
  };
  const Case cases[] = {
      {"\xC2\x85", "U+0085"},      // NEXT LINE (a C1 control)
      {"\xC2\x80", "U+0080"},      // first C1 control
      {"\xC2\x9F", "U+009F"},      // last C1 control
      {"\xE2\x80\xA8", "U+2028"},  // LINE SEPARATOR
      {"\xE2\x80\xA9", "U+2029"},  // PARAGRAPH SEPARATOR
      {"\xE2\x80\x8E", "U+200E"},  // LEFT-TO-RIGHT MARK
      {"\xE2\x80\x8F", "U+200F"},  // RIGHT-TO-LEFT MARK
      {"\xD8\x9C", "U+061C"},      // ARABIC LETTER MARK
      {"\xE2\x80\xAA", "U+202A"},  // LEFT-TO-RIGHT EMBEDDING
      {"\xE2\x81\xA9", "U+2069"},  // POP DIRECTIONAL ISOLATE
  };
  for (const auto& c : cases) {
    const std::string name = absl::StrCat("resnet", c.utf8, "50");
    v1::Trace trace = OneKernelTrace();
    trace.set_model_name(name);
    ExpectInvalid(trace, "model_name");
    ExpectInvalid(trace, c.code_point);
    trace = OneKernelTrace();
    trace.mutable_operations(0)->set_name(name);
    ExpectInvalid(trace, "operations[0].name");
    trace = OneKernelTrace();
    trace.mutable_operations(0)->mutable_forward()->mutable_kernels(0)->set_name(name);
    ExpectInvalid(trace, "operations[0].forward.kernels[0].name");
    trace = OneKernelTrace();
    (*trace.mutable_metadata())[name] = "x";
    ExpectInvalid(trace, "metadata key");
  }
  // Not UTF-8 although the old check took them: overlong forms (C1 85 is
  // 'E', E0 82 85 is U+0085), a UTF-16 surrogate, a code point above
  // U+10FFFF; and a 5-byte form, which it did refuse.
  for (const char* bad :
       {"\xC1\x85", "\xE0\x82\x85", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF8\x88\x80\x80\x80"}) {
    v1::Trace trace = OneKernelTrace();
    trace.set_model_name(absl::StrCat("a", bad, "b"));
    ExpectInvalid(trace, "model_name is not valid UTF-8 at byte 1");
  }
  // Neighbours that are ordinary text stay valid: NBSP, zero-width joiner
  // (emoji sequences), U+2027, U+202F, CJK, an emoji.
  v1::Trace trace = OneKernelTrace();
  trace.set_model_name(
      "a\xC2\xA0"
      "b\xE2\x80\x8D\xE2\x80\xA7\xE2\x80\xAF\xE6\xA8\xA1\xE5\x9E\x8B\xF0\x9F\x9A\x80");
  EXPECT_TRUE(ValidateTrace(trace).ok()) << ValidateTrace(trace);
}

TEST(TraceValidationTest, BatchSizeAndPrecisionAreMeaningful) {
  v1::Trace trace = OneKernelTrace();
  trace.set_batch_size((1u << 30) + 1);
  ExpectInvalid(trace, "batch_size");
  trace = OneKernelTrace();
  trace.set_precision(static_cast<v1::Precision>(99));
  ExpectInvalid(trace, "precision");
  trace = OneKernelTrace();
  trace.set_precision(v1::PRECISION_AMP_BF16);
  EXPECT_TRUE(ValidateTrace(trace).ok());
}

}  // namespace
}  // namespace habitat
