// Malformed and hostile input: every case must come back as
// INVALID_ARGUMENT with a message that says where, never as a crash. The
// small JSON snippets here are shapes of input, not measurements; the last
// test damages a real capture.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/file_io.h"
#include "core/kineto/kineto_import.h"
#include "core/trace/trace_validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// One cpu_op launching one kernel; $OP_ARGS, $DUR, $KERNEL_ARGS and
// $EXTRA are replaced to break one thing at a time.
constexpr char kTemplate[] = R"({
  "deviceProperties": [{"id": 0, "name": "GPU", "numSms": 1}],
  "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1,
     "ts": 10.0, "dur": 5.0, "args": {$OP_ARGS}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
     "tid": 1, "ts": 11.0, "dur": 1.0, "args": {"correlation": 7}},
    {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 7,
     "ts": 12.0, "dur": $DUR, "args": {$KERNEL_ARGS}}$EXTRA
  ]
})";

constexpr char kGoodKernelArgs[] =
    R"("correlation": 7, "stream": 7, "device": 0, "grid": [1, 1, 1],
       "block": [128, 1, 1], "registers per thread": 16,
       "shared memory": 0)";

std::string Make(std::string op_args = R"("External id": 1)", std::string dur = "2.5",
                 std::string kernel_args = kGoodKernelArgs, std::string extra = "") {
  return absl::StrReplaceAll(
      kTemplate,
      {{"$OP_ARGS", op_args}, {"$DUR", dur}, {"$KERNEL_ARGS", kernel_args}, {"$EXTRA", extra}});
}

absl::Status Import(const std::string& json) {
  return ImportKinetoTrace(json, KinetoImportOptions()).status();
}

#define EXPECT_INVALID(json, ...)                                             \
  do {                                                                        \
    const absl::Status status_ = Import(json);                                \
    EXPECT_EQ(status_.code(), absl::StatusCode::kInvalidArgument) << status_; \
    EXPECT_THAT(std::string(status_.message()), AllOf(__VA_ARGS__));          \
  } while (false)

TEST(KinetoMalformedTest, TemplateItselfImports) {
  // Guards the cases below: each breaks exactly one thing in a valid input.
  auto trace = ImportKinetoTrace(Make(), KinetoImportOptions());
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->operations_size(), 1);
  EXPECT_EQ(trace->operations(0).forward().time_ns(), 2500);
}

TEST(KinetoMalformedTest, NotJson) {
  EXPECT_INVALID("this is not json", HasSubstr("not valid JSON"));
  EXPECT_INVALID("", HasSubstr("not valid JSON"));
  EXPECT_INVALID("{\"traceEvents\": [\xff]}", HasSubstr("not valid JSON"));
}

TEST(KinetoMalformedTest, TruncatedJson) {
  const std::string full = Make();
  for (size_t cut : {full.size() / 4, full.size() / 2, full.size() - 2}) {
    EXPECT_INVALID(full.substr(0, cut), HasSubstr("not valid JSON"), HasSubstr("byte"));
  }
}

TEST(KinetoMalformedTest, MissingOrEmptyTraceEvents) {
  EXPECT_INVALID("[]", HasSubstr("top level must be an object"));
  EXPECT_INVALID("{}", HasSubstr("no \"traceEvents\""));
  EXPECT_INVALID(R"({"traceEvents": {}})", HasSubstr("must be an array"));
  EXPECT_INVALID(R"({"traceEvents": []})", HasSubstr("\"traceEvents\" is empty"));
  EXPECT_INVALID(R"({"traceEvents": [3]})", HasSubstr("traceEvents[0] must be an object"));
}

TEST(KinetoMalformedTest, NoGpuWork) {
  EXPECT_INVALID(
      R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add",
          "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})",
      HasSubstr("no kernel"));
}

TEST(KinetoMalformedTest, NegativeDuration) {
  EXPECT_INVALID(Make(R"("External id": 1)", "-3.0"), HasSubstr("traceEvents[2] \"relu_kernel\""),
                 HasSubstr("\"dur\""), HasSubstr("negative"));
}

TEST(KinetoMalformedTest, NonFiniteOrHugeTimes) {
  // Beyond double range: the parser itself refuses it.
  EXPECT_INVALID(Make(R"("External id": 1)", "1e400"), HasSubstr("not valid JSON"),
                 HasSubstr("1e400"));
  EXPECT_INVALID(Make(R"("External id": 1)", "1e300"), HasSubstr("not a finite time"));
}

TEST(KinetoMalformedTest, WrongTypes) {
  EXPECT_INVALID(Make(R"("External id": 1)", "\"2.5\""),
                 HasSubstr("traceEvents[2] \"relu_kernel\""),
                 HasSubstr("\"dur\" must be a number, got string"));
  EXPECT_INVALID(Make(R"("External id": "one")"), HasSubstr("traceEvents[0] \"aten::relu\""),
                 HasSubstr("args.External id"));
  EXPECT_INVALID(Make(R"("External id": 1)", "2.5",
                      absl::StrReplaceAll(kGoodKernelArgs, {{"[1, 1, 1]", "[1, 1]"}})),
                 HasSubstr("args.grid"), HasSubstr("3 integers"));
  EXPECT_INVALID(Make(R"("External id": 1)", "2.5",
                      absl::StrReplaceAll(kGoodKernelArgs, {{"[128, 1, 1]", "[-1, 1, 1]"}})),
                 HasSubstr("args.block"));
  EXPECT_INVALID(
      Make(R"("External id": 1)", "2.5",
           absl::StrReplaceAll(kGoodKernelArgs, {{"\"correlation\": 7", "\"correlation\": 1e30"}})),
      HasSubstr("args.correlation"));
  EXPECT_INVALID(Make(R"("External id": 1)", "2.5", kGoodKernelArgs,
                      R"(, {"ph": "X", "cat": "cpu_op", "name": 5, "pid": 1, "tid": 1,
                 "ts": 1, "dur": 1})"),
                 HasSubstr("traceEvents[3]"), HasSubstr("\"name\" must be a string"));
}

TEST(KinetoMalformedTest, MissingKernelArgs) {
  EXPECT_INVALID(Make(R"("External id": 1)", "2.5",
                      absl::StrReplaceAll(kGoodKernelArgs, {{"\"correlation\": 7,", ""}})),
                 HasSubstr("traceEvents[2] \"relu_kernel\""),
                 HasSubstr("args.correlation\" is missing"));
  EXPECT_INVALID(
      Make(R"("External id": 1)", "2.5",
           absl::StrReplaceAll(kGoodKernelArgs, {{"\"registers per thread\": 16,", ""}})),
      HasSubstr("args.registers per thread\" is missing"));
  EXPECT_INVALID(Make(R"("External id": 1)", "2.5",
                      absl::StrReplaceAll(kGoodKernelArgs, {{"\"grid\": [1, 1, 1],", ""}})),
                 HasSubstr("args.grid\" is missing"));
}

TEST(KinetoMalformedTest, BadShapes) {
  EXPECT_INVALID(Make(R"("Input Dims": "x", "Input type": ["float"])"),
                 HasSubstr("traceEvents[0] \"aten::relu\""),
                 HasSubstr("args.Input Dims\" must be an array"));
  EXPECT_INVALID(Make(R"("Input Dims": [["a"]], "Input type": ["float"])"),
                 HasSubstr("Input Dims[0]"));
  EXPECT_INVALID(Make(R"("Input Dims": [[2]], "Input type": [3])"),
                 HasSubstr("Input type[0]\" must be a string"));
  EXPECT_INVALID(Make(R"("Input Dims": [[2], [3]], "Input type": ["float"])"),
                 HasSubstr("has 2 entries"));
}

TEST(KinetoMalformedTest, BadDeviceProperties) {
  std::string json = absl::StrReplaceAll(Make(), {{R"("numSms": 1)", R"("numSms": "many")"}});
  EXPECT_INVALID(json, HasSubstr("deviceProperties[0].numSms"));
}

TEST(KinetoMalformedTest, DeepNesting) {
  const std::string deep = absl::StrCat("{\"traceEvents\": ", std::string(100000, '['));
  EXPECT_INVALID(deep, HasSubstr("nested deeper"));
  // Deep nesting inside an otherwise valid event's args.
  const std::string nested =
      absl::StrCat(R"("External id": 1, "x": )", std::string(70, '['), std::string(70, ']'));
  EXPECT_INVALID(Make(nested), HasSubstr("nested deeper"));
}

TEST(KinetoMalformedTest, UnknownProfilerStep) {
  KinetoImportOptions options;
  options.profiler_step = 3;
  const absl::Status status = ImportKinetoTrace(Make(), options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("no ProfilerStep#3 (steps present: none)"));
}

TEST(KinetoMalformedTest, BadMemoryEvents) {
  auto memory = [](const std::string& args) {
    return absl::StrCat(R"(, {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                              "ts": 11.0, "args": {)",
                        args, "}}");
  };
  const std::string good = R"("Device Type": 1, "Device Id": 0, "Total Allocated": 512,
                              "Total Reserved": 2048)";
  auto trace = ImportKinetoTrace(Make(R"("External id": 1)", "2.5", kGoodKernelArgs, memory(good)),
                                 KinetoImportOptions());
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->memory().peak_allocated_bytes(), 512);
  EXPECT_EQ(trace->memory().peak_reserved_bytes(), 2048);
  // Without "Bytes" the start is unknown; with more bytes than the total it
  // would be negative, and stays unknown too.
  EXPECT_FALSE(trace->memory().has_allocated_bytes_at_start());
  trace = ImportKinetoTrace(Make(R"("External id": 1)", "2.5", kGoodKernelArgs,
                                 memory(absl::StrCat(good, R"(, "Bytes": 4096)"))),
                            KinetoImportOptions());
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_FALSE(trace->memory().has_allocated_bytes_at_start());
  // A window whose first event frees began with more than any event reports
  // after it: the peak counts that start (ValidateTrace refuses a peak below
  // the start).
  KinetoImportOptions batch_one;
  batch_one.batch_size = 1;
  trace = ImportKinetoTrace(Make(R"("External id": 1)", "2.5", kGoodKernelArgs,
                                 memory(absl::StrCat(good, R"(, "Bytes": -1024)"))),
                            batch_one);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->memory().allocated_bytes_at_start(), 1536);
  EXPECT_EQ(trace->memory().peak_allocated_bytes(), 1536);
  EXPECT_TRUE(ValidateTrace(*trace).ok()) << ValidateTrace(*trace);
  EXPECT_INVALID(Make(R"("External id": 1)", "2.5", kGoodKernelArgs,
                      memory(absl::StrCat(good, R"(, "Bytes": "some")"))),
                 HasSubstr("args.Bytes"), HasSubstr("must be an integer"));

  // Older torch wrote no totals: the memory stays unknown.
  trace = ImportKinetoTrace(
      Make(R"("External id": 1)", "2.5", kGoodKernelArgs, memory(R"("Device Type": 1)")),
      KinetoImportOptions());
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_FALSE(trace->has_memory());

  EXPECT_INVALID(Make(R"("External id": 1)", "2.5", kGoodKernelArgs,
                      memory(R"("Device Type": 1, "Total Allocated": -5)")),
                 HasSubstr("[memory]"), HasSubstr("args.Total Allocated"), HasSubstr("negative"));
  EXPECT_INVALID(Make(R"("External id": 1)", "2.5", kGoodKernelArgs,
                      memory(R"("Device Type": 1, "Total Reserved": "lots")")),
                 HasSubstr("args.Total Reserved"), HasSubstr("must be an integer"));
  EXPECT_INVALID(Make(R"("External id": 1)", "2.5", kGoodKernelArgs,
                      R"(, {"ph": "i", "name": "[memory]", "ts": 1.0})"),
                 HasSubstr("[memory]"), HasSubstr("\"args\" is missing"));
}

TEST(KinetoMalformedTest, NonPositiveWallOverride) {
  KinetoImportOptions options;
  options.iteration_wall_ns = 0;
  EXPECT_EQ(ImportKinetoTrace(Make(), options).status().code(), absl::StatusCode::kInvalidArgument);
}

// Damaged copies of a real capture: truncated anywhere, or one byte
// replaced by JSON punctuation, a digit or a sign. Each must import or fail
// with INVALID_ARGUMENT; none may crash (run under ASan/UBSan too).
TEST(KinetoMalformedTest, DamagedRealTraceNeverCrashes) {
  auto text = ReadFile(std::string(HABITAT_TESTDATA_DIR) + "/kineto/h100/dcgan_b64_fp32.json.gz");
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string& good = *text;
  ASSERT_TRUE(ImportKinetoTrace(good, KinetoImportOptions()).ok());
  const char kBytes[] = {'"', '-', '[', ']', '{', '}', ',', ':', '9', 'e', '.'};
  int rejected = 0;
  for (int i = 0; i < 48; ++i) {
    // Spread positions over the file (Knuth's multiplicative hash).
    const size_t pos = (static_cast<uint64_t>(i + 1) * 2654435761u) % good.size();
    std::string bad = good;
    if (i % 4 == 0) {
      bad.resize(pos);
    } else {
      bad[pos] = kBytes[i % sizeof(kBytes)];
    }
    const absl::Status status = ImportKinetoTrace(bad, KinetoImportOptions()).status();
    EXPECT_TRUE(status.ok() || status.code() == absl::StatusCode::kInvalidArgument) << status;
    rejected += !status.ok();
  }
  // Most damage is detected (a digit replaced by a digit may not be).
  EXPECT_GT(rejected, 24);
}

}  // namespace
}  // namespace habitat
