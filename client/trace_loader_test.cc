#include "client/trace_loader.h"

#include <filesystem>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class TraceLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("trace_loader_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& contents) {
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(WriteFileAtomically(path, contents).ok());
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(TraceLoaderTest, MissingFileNamesThePath) {
  const std::string path = (dir_ / "nope.pb").string();
  auto trace = LoadTraceFile(path, {});
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr(path));
}

TEST_F(TraceLoaderTest, EmptyAndBlankFilesAreRejected) {
  for (const char* contents : {"", " \n\t\n"}) {
    const std::string path = Write("empty.pb", contents);
    auto trace = LoadTraceFile(path, {});
    ASSERT_FALSE(trace.ok());
    EXPECT_EQ(trace.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(trace.status().message(), HasSubstr("empty"));
    EXPECT_THAT(trace.status().message(), HasSubstr(path));
  }
}

TEST_F(TraceLoaderTest, DirectoryIsRejected) {
  auto trace = LoadTraceFile(dir_.string(), {});
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("directory"));
}

TEST_F(TraceLoaderTest, RandomBytesAreNotATrace) {
  // Several seeds: protobuf's parser accepts some byte strings, which the
  // loader must still reject because they hold nothing a trace has.
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    std::string bytes(4096, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
    if (bytes[0] == '{' || bytes[0] == '[' || bytes[0] == ' ') bytes[0] = '\x01';
    const std::string path = Write("random.bin", bytes);
    auto trace = LoadTraceFile(path, {});
    ASSERT_FALSE(trace.ok()) << "seed " << seed;
    EXPECT_THAT(trace.status().message(),
                HasSubstr("not a habitat trace or a torch.profiler JSON trace"));
  }
}

TEST_F(TraceLoaderTest, TruncatedGzipIsAClearError) {
  auto gz = Gzip(std::string(100000, 'x'));
  ASSERT_TRUE(gz.ok());
  const std::string path = Write("truncated.json.gz", gz->substr(0, gz->size() / 2));
  auto trace = LoadTraceFile(path, {});
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(trace.status().message(), HasSubstr(path));
}

// A small file of zeros inflates a thousandfold (10 MB of gzip once made
// the CLI abort with std::bad_alloc); it is refused at the limit instead.
TEST_F(TraceLoaderTest, GzipInflatingPastTheLimitIsRefused) {
  auto gz = Gzip(std::string(4 << 20, '\0'));
  ASSERT_TRUE(gz.ok());
  const std::string path = Write("zeros.json.gz", *gz);
  TraceLoadOptions options;
  options.max_inflated_bytes = 1 << 20;
  auto trace = LoadTraceFile(path, options);
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(trace.status().message(), HasSubstr(path));
  EXPECT_THAT(trace.status().message(), HasSubstr("inflates to more than 1 MiB"));
  EXPECT_EQ(TraceLoadOptions().max_inflated_bytes, kMaxInflatedTraceBytes);
}

TEST_F(TraceLoaderTest, MalformedJsonIsReportedAsAKinetoImportError) {
  const std::string path = Write("bad.json", "{\"traceEvents\": [ {\"ph\": \"X\", ");
  auto trace = LoadTraceFile(path, {});
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr(path));
  EXPECT_THAT(trace.status().message(), HasSubstr("torch.profiler JSON"));
}

TEST_F(TraceLoaderTest, JsonWithoutKernelsIsRejected) {
  const std::string path = Write("nokernels.json", "{\"traceEvents\": []}");
  auto trace = LoadTraceFile(path, {});
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr(path));
}

TEST_F(TraceLoaderTest, SaveThenLoadRoundTripsPlainAndGzip) {
  v1::Trace trace;
  trace.set_format_version(1);
  trace.set_model_name("roundtrip");
  trace.set_batch_size(4);
  trace.mutable_origin()->set_device_id("H100-SXM");
  trace.add_operations()->set_name("aten::mm");
  for (const char* name : {"t.pb", "t.pb.gz"}) {
    const std::string path = (dir_ / name).string();
    ASSERT_TRUE(SaveTraceFile(path, trace).ok());
    TraceLoadReport report;
    report.kind = TraceFileKind::kKinetoJson;
    auto loaded = LoadTraceFile(path, {}, &report);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(report.kind, TraceFileKind::kBinaryTrace);
    EXPECT_TRUE(MessageDifferencer::Equals(*loaded, trace));
  }
  auto raw = ReadFile((dir_ / "t.pb.gz").string());  // inflates
  auto file_bytes = std::filesystem::file_size(dir_ / "t.pb.gz");
  ASSERT_TRUE(raw.ok());
  EXPECT_NE(file_bytes, raw->size());  // it was stored compressed
}

TEST_F(TraceLoaderTest, SaveIntoMissingDirectoryFails) {
  EXPECT_FALSE(SaveTraceFile((dir_ / "no" / "such" / "t.pb").string(), v1::Trace()).ok());
}

TEST(TraceFileStemTest, StripsDirectoriesAndTraceExtensions) {
  EXPECT_EQ(TraceFileStem("/a/b/resnet50.json.gz"), "resnet50");
  EXPECT_EQ(TraceFileStem("gpt2.pb"), "gpt2");
  EXPECT_EQ(TraceFileStem("x/bert.base.trace.gz"), "bert.base");
  EXPECT_EQ(TraceFileStem(".gz"), ".gz");
}

TEST(PrecisionTest, ParsesAndNamesEveryPrecision) {
  for (const char* name : {"fp32", "tf32", "fp16", "bf16", "amp_fp16", "amp_bf16"}) {
    auto precision = ParsePrecision(name);
    ASSERT_TRUE(precision.ok()) << name;
    EXPECT_EQ(PrecisionName(*precision), name);
  }
  EXPECT_EQ(*ParsePrecision("AMP_BF16"), v1::PRECISION_AMP_BF16);
  EXPECT_THAT(ParsePrecision("fp8").status().message(), HasSubstr("amp_bf16"));
  EXPECT_EQ(PrecisionName(v1::PRECISION_UNSPECIFIED), "unspecified");
}

// On the real H100 capture (tests/testdata/kineto/h100, see
// eval/capture/README.md).
class TraceLoaderFixtureTest : public TraceLoaderTest {
 protected:
  static std::string Fixture() {
    return std::string(HABITAT_TESTDATA_DIR) + "/kineto/h100/resnet50_b16_fp32.json.gz";
  }
};

TEST_F(TraceLoaderFixtureTest, ImportsTheGzippedKinetoTrace) {
  TraceLoadOptions options;
  options.batch_size = 16;
  options.precision = v1::PRECISION_FP32;
  TraceLoadReport report;
  report.kind = TraceFileKind::kBinaryTrace;
  auto trace = LoadTraceFile(Fixture(), options, &report);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(report.kind, TraceFileKind::kKinetoJson);
  EXPECT_EQ(trace->model_name(), "resnet50_b16_fp32");  // the file stem
  EXPECT_EQ(trace->batch_size(), 16u);
  EXPECT_THAT(report.notes, IsEmpty());  // the options agree with the shapes
  EXPECT_EQ(trace->precision(), v1::PRECISION_FP32);
  EXPECT_THAT(trace->origin().name(), HasSubstr("H100"));
  EXPECT_GT(trace->operations_size(), 100);
  EXPECT_GT(trace->iteration_gpu_busy_ns(), 0);

  options.model_name = "resnet50";
  auto named = LoadTraceFile(Fixture(), options);
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->model_name(), "resnet50");
}

// A torch.profiler trace says nothing of its batch or precision; the
// layers' input shapes and types do, and the user is told what was taken.
TEST_F(TraceLoaderFixtureTest, InfersBatchAndPrecisionAndSaysSo) {
  TraceLoadReport report;
  auto trace = LoadTraceFile(Fixture(), {}, &report);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->batch_size(), 16u);
  EXPECT_EQ(trace->precision(), v1::PRECISION_FP32);
  ASSERT_EQ(report.notes.size(), 2u);
  EXPECT_THAT(report.notes[0], HasSubstr("batch size 16 inferred from the leading dimension"));
  EXPECT_THAT(report.notes[1], HasSubstr("precision fp32 inferred from the data type"));
}

// An option wins over the inference, which can be misled; the disagreement
// is said.
TEST_F(TraceLoaderFixtureTest, AnOptionThatDisagreesIsUsedWithANote) {
  TraceLoadOptions options;
  options.batch_size = 32;
  options.precision = v1::PRECISION_BF16;
  TraceLoadReport report;
  auto trace = LoadTraceFile(Fixture(), options, &report);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->batch_size(), 32u);
  EXPECT_EQ(trace->precision(), v1::PRECISION_BF16);
  EXPECT_THAT(report.notes, ElementsAre(HasSubstr("--batch-size 32 is used, although"),
                                        HasSubstr("--precision bf16 is used, although")));
}

// Without recorded shapes (record_shapes=False) nothing is inferred: no
// made-up batch size.
TEST_F(TraceLoaderFixtureTest, NoShapesNoInferredBatch) {
  auto json = ReadFile(Fixture());
  ASSERT_TRUE(json.ok()) << json.status();
  const std::string without_shapes = Write(
      "no_shapes.json", absl::StrReplaceAll(*json, {{"\"Input Dims\"", "\"Unrecorded dims\""},
                                                    {"\"Input type\"", "\"Unrecorded type\""}}));
  TraceLoadReport report;
  auto trace = LoadTraceFile(without_shapes, {}, &report);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->batch_size(), 0u);
  for (const std::string& note : report.notes) EXPECT_THAT(note, Not(HasSubstr("batch")));
}

TEST_F(TraceLoaderFixtureTest, PlainAndGzippedJsonGiveTheSameTrace) {
  auto json = ReadFile(Fixture());
  ASSERT_TRUE(json.ok()) << json.status();
  const std::string plain = Write("resnet50_b16_fp32.json", *json);
  TraceLoadOptions options;
  options.batch_size = 16;
  auto from_gz = LoadTraceFile(Fixture(), options);
  auto from_plain = LoadTraceFile(plain, options);
  ASSERT_TRUE(from_gz.ok() && from_plain.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*from_gz, *from_plain));
}

// Windows editors save UTF-8 with a byte order mark; JSON parsers may
// ignore it (RFC 8259, 8.1) and so does the loader, plain or gzipped.
TEST_F(TraceLoaderFixtureTest, JsonWithAByteOrderMarkIsImported) {
  auto json = ReadFile(Fixture());
  ASSERT_TRUE(json.ok()) << json.status();
  const std::string with_bom = absl::StrCat("\xEF\xBB\xBF", *json);
  auto gz = Gzip(with_bom);
  ASSERT_TRUE(gz.ok());
  TraceLoadOptions options;
  options.batch_size = 16;
  auto plain = LoadTraceFile(Fixture(), options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const std::string& path : {Write("bom.json", with_bom), Write("bom.json.gz", *gz)}) {
    TraceLoadReport report;
    auto loaded = LoadTraceFile(path, options, &report);
    ASSERT_TRUE(loaded.ok()) << path << ": " << loaded.status();
    EXPECT_EQ(report.kind, TraceFileKind::kKinetoJson);
    loaded->set_model_name(plain->model_name());
    EXPECT_TRUE(MessageDifferencer::Equals(*plain, *loaded)) << path;
  }
  // A mark followed by nothing but whitespace is still an empty file.
  EXPECT_THAT(LoadTraceFile(Write("bom_only.json", "\xEF\xBB\xBF \n"), options).status().message(),
              HasSubstr("the file is empty"));
}

TEST_F(TraceLoaderFixtureTest, TruncatedCopiesOfTheRealTraceAreClearErrors) {
  const auto size = std::filesystem::file_size(Fixture());
  auto json = ReadFile(Fixture());  // inflated
  ASSERT_TRUE(json.ok());
  auto gz = Gzip(*json);
  ASSERT_TRUE(gz.ok());
  ASSERT_GT(size, 1000u);

  const std::string cut_gz = Write("cut.json.gz", gz->substr(0, gz->size() / 2));
  auto from_cut_gz = LoadTraceFile(cut_gz, {});
  ASSERT_FALSE(from_cut_gz.ok());
  EXPECT_THAT(from_cut_gz.status().message(), HasSubstr(cut_gz));

  const std::string cut_json = Write("cut.json", json->substr(0, json->size() / 2));
  auto from_cut_json = LoadTraceFile(cut_json, {});
  ASSERT_FALSE(from_cut_json.ok());
  EXPECT_EQ(from_cut_json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(from_cut_json.status().message(), HasSubstr(cut_json));
  EXPECT_THAT(from_cut_json.status().message(), HasSubstr("torch.profiler JSON"));
}

TEST_F(TraceLoaderFixtureTest, ImportedTraceSurvivesSaveAndLoad) {
  TraceLoadOptions options;
  options.batch_size = 16;
  auto trace = LoadTraceFile(Fixture(), options);
  ASSERT_TRUE(trace.ok());
  const std::string path = (dir_ / "resnet50.pb.gz").string();
  ASSERT_TRUE(SaveTraceFile(path, *trace).ok());
  TraceLoadReport report;
  report.kind = TraceFileKind::kKinetoJson;
  auto loaded = LoadTraceFile(path, {}, &report);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(report.kind, TraceFileKind::kBinaryTrace);
  EXPECT_TRUE(MessageDifferencer::Equals(*loaded, *trace));
}

}  // namespace
}  // namespace habitat
