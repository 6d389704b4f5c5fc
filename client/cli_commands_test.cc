// The `habitat` subcommands run in-process on the real data directory:
// exit codes, usage errors and the messages people see. Predictions on real
// traces are covered by tests/golden.
#include "client/cli_commands.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "client/cli_test_runs.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using testing_cli::AgentTrace;
using testing_cli::AgentTraceWithMemory;
using testing_cli::AgentTraceWithModules;
using testing_cli::CliRun;
using testing_cli::Habitat;
using testing_cli::HabitatWithModels;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? end : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

// Terminal columns of UTF-8 text: code points ("±" is two bytes, one column).
size_t Columns(const std::string& line) {
  size_t columns = 0;
  for (char c : line) columns += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return columns;
}

// The lines of `err` from "warnings" on (the notes come before).
std::vector<std::string> WarningLines(const std::string& err) {
  const size_t at = err.find("warnings");
  return at == std::string::npos ? std::vector<std::string>() : Lines(err.substr(at));
}

// The warnings of `err` with their wrapped lines joined again (the rest
// of a warning is indented by 4).
std::string Unwrapped(std::string err) {
  for (size_t at = err.find("\n    "); at != std::string::npos; at = err.find("\n    ", at)) {
    err.replace(at, 5, " ");
  }
  return err;
}

// How often `needle` occurs in `text`.
int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// A torch.profiler trace of GPT-2 at batch 8 in bf16 on an H100 (the README's
// example), with the lambda catalog, whose instance names are long.
std::vector<std::string> Gpt2Lambda() {
  return {"predict", std::string(HABITAT_TESTDATA_DIR) + "/kineto/h100/gpt2_b8_bf16.json.gz",
          "--catalog", "lambda"};
}

std::vector<std::string> With(std::vector<std::string> args, std::vector<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// A habitat trace the agent recorded at batch 32 on an H100.
TEST(CliCommandsTest, HelpAndVersion) {
  CliRun help = Habitat({"--help"});
  EXPECT_EQ(help.code, kExitOk);
  EXPECT_THAT(help.out, HasSubstr("predict TRACE"));
  CliRun predict_help = Habitat({"predict", "--help"});
  EXPECT_EQ(predict_help.code, kExitOk);
  EXPECT_THAT(predict_help.out, HasSubstr("--catalog-file"));
  CliRun predict_h = Habitat({"predict", "-h"});  // as 'habitat -h' works
  EXPECT_EQ(predict_h.code, kExitOk);
  EXPECT_EQ(predict_h.out, predict_help.out);
  EXPECT_EQ(Habitat({"--version"}).out, "habitat test\n");
}

TEST(CliCommandsTest, UsageErrorsExitWith2AndSayWhatToDo) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"frobnicate"},
      {"predict"},
      {"predict", "a.pb", "b.pb"},
      {"predict", "a.pb", "--colour"},
      {"predict", "a.pb", "--format", "xml"},
      {"predict", "a.pb", "--catalog", "aws", "--catalog-file", "x"},
      {"predict", "a.pb", "--devices", "A,,B"},
      {"predict", "a.pb", "--top", "0"},
      {"predict", "a.pb", "--batch-size", "-3"},
      {"predict", "a.pb", "--precision", "fp8"},
      {"predict", "sha256:" + std::string(64, 'a')},
      {"devices", "extra"},
      {"catalogs", "--server"},
      {"upload", "a.pb"},
      {"import-kineto", "only-one"},
      {"devices", "--tls"},
      {"catalogs", "--token-file", "/tmp/token"},
      {"predict", "a.pb", "--tls-ca", "ca.pem"},
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(::testing::PrintToString(args));
    CliRun run = Habitat(args);
    EXPECT_EQ(run.code, kExitUsage);
    EXPECT_THAT(run.out, IsEmpty());
    EXPECT_THAT(run.err, StartsWith("habitat"));
  }
  EXPECT_THAT(Habitat({"predict", "sha256:" + std::string(64, 'a')}).err,
              HasSubstr("give --server"));
  EXPECT_THAT(Habitat({"upload", "a.pb"}).err, HasSubstr("--server HOST:PORT is required"));
  CliRun typo = Habitat({"prdict", "a.pb"});
  EXPECT_EQ(typo.code, kExitUsage);
  EXPECT_THAT(typo.err, HasSubstr("unknown command 'prdict' (did you mean 'predict'?)"));
}

// GPUs as nvidia-smi names them, ids and catalogs in any case; a near miss
// gets the closest name.
TEST(CliCommandsTest, NamesAsPeopleTypeThem) {
  CliRun typed = Habitat({"predict", AgentTrace(), "--devices", "h100-sxm,Tesla T4", "--catalog",
                          "AWS", "--format", "csv"});
  ASSERT_EQ(typed.code, kExitOk) << typed.err;
  EXPECT_THAT(typed.out, HasSubstr(",H100-SXM,"));
  EXPECT_THAT(typed.out, HasSubstr(",T4,"));
  CliRun near_gpu = Habitat({"predict", AgentTrace(), "--devices", "H100-SMX"});
  EXPECT_EQ(near_gpu.code, kExitFailure);
  EXPECT_THAT(near_gpu.err, HasSubstr("(did you mean 'H100-SXM'?)"));
  CliRun near_catalog = Habitat({"predict", AgentTrace(), "--catalog", "lamda"});
  EXPECT_EQ(near_catalog.code, kExitFailure);
  EXPECT_THAT(near_catalog.err, HasSubstr("(did you mean 'lambda'?)"));
}

TEST(CliCommandsTest, FailuresExitWith1AndNameTheFile) {
  CliRun missing = Habitat({"predict", "/nonexistent/trace.pb"});
  EXPECT_EQ(missing.code, kExitFailure);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/trace.pb"));
  CliRun not_trace = Habitat({"predict", std::string(HABITAT_DATA_DIR) + "/devices.textproto"});
  EXPECT_EQ(not_trace.code, kExitFailure);
  EXPECT_THAT(not_trace.err, HasSubstr("not a habitat trace or a torch.profiler JSON trace"));
  CliRun bad_data = Habitat({"devices", "--data-dir", "/nonexistent/data"});
  EXPECT_EQ(bad_data.code, kExitFailure);
  EXPECT_THAT(bad_data.err, HasSubstr("--data-dir"));
  CliRun bad_catalog = Habitat({"predict", "/nonexistent/trace.pb", "--catalog-file",
                                std::string(HABITAT_DATA_DIR) + "/devices.textproto"});
  EXPECT_EQ(bad_catalog.code, kExitFailure);
  CliRun unreachable = Habitat({"devices", "--server", "127.0.0.1:1"});
  EXPECT_EQ(unreachable.code, kExitFailure);
  EXPECT_THAT(unreachable.err, HasSubstr("127.0.0.1:1"));
}

// The agent recorded batch 32: --batch-size 64 predicts batch 64 from it
// (scaled, with the warning, in full with --explain); relabelling the
// traced batch is refused.
TEST(CliCommandsTest, AnotherBatchIsPredictedAndTheTracedOneIsNotRelabelled) {
  const std::string trace = AgentTrace();
  CliRun other =
      Habitat({"predict", trace, "--batch-size", "64", "--devices", "H200", "--explain"});
  EXPECT_EQ(other.code, kExitOk) << other.err;
  EXPECT_THAT(other.out, HasSubstr("batch 64"));
  EXPECT_THAT(other.err, HasSubstr("H200: predicted at another batch than traced"));
  EXPECT_THAT(other.err, HasSubstr("predicted at batch 64 from a trace at batch 32"));
  CliRun relabel = Habitat({"predict", trace, "--traced-batch-size", "64", "--devices", "H200"});
  EXPECT_EQ(relabel.code, kExitFailure);
  EXPECT_THAT(relabel.err, HasSubstr("the trace records batch size 32; --traced-batch-size 64 "
                                     "would relabel the samples without predicting them"));
  EXPECT_THAT(relabel.out, IsEmpty());
  CliRun same = Habitat({"predict", trace, "--batch-size", "32", "--devices", "H200"});
  EXPECT_EQ(same.code, kExitOk) << same.err;
  EXPECT_THAT(same.out, HasSubstr("batch 32"));
  EXPECT_THAT(same.out + same.err, Not(HasSubstr("predicted at batch")));
  CliRun far = Habitat({"predict", trace, "--batch-size", "1000000000", "--devices", "H200"});
  EXPECT_EQ(far.code, kExitFailure);
  EXPECT_THAT(far.err, HasSubstr("out of range for a trace at batch 32"));
}

// Request values have one owner, the backend: the CLI only parses them, and
// an out-of-range --host-speed gets the backend's answer; without --spot the
// backend's default price kind (on-demand) applies.
TEST(CliCommandsTest, TheBackendChecksRequestValuesAndSetsDefaults) {
  const std::string trace = AgentTrace();
  CliRun fast = Habitat({"predict", trace, "--host-speed", "1000", "--devices", "H200"});
  EXPECT_EQ(fast.code, kExitFailure);
  EXPECT_THAT(fast.err, HasSubstr("target_host_speed must be within [0.01, 100]"));
  CliRun word = Habitat({"predict", trace, "--host-speed", "fast", "--devices", "H200"});
  EXPECT_EQ(word.code, kExitUsage);
  EXPECT_THAT(word.err, HasSubstr("--host-speed must be a number"));
  CliRun plain = Habitat({"predict", trace, "--devices", "H200", "--catalog", "aws"});
  EXPECT_EQ(plain.code, kExitOk) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("on-demand"));
}

// --breakdown and --top do what they say in every format, or are refused.
// import-kineto never writes a trace that predict would refuse: a profile
// whose kernel claims 300 registers per thread (CUDA allows 255).
TEST(CliCommandsTest, ImportRefusesToWriteAnInvalidTrace) {
  auto json = ReadFile(std::string(HABITAT_TESTDATA_DIR) + "/kineto/h100/dcgan_b64_fp32.json.gz");
  ASSERT_TRUE(json.ok()) << json.status();
  const std::string needle = "\"registers per thread\":255";
  const size_t at = json->find(needle);
  ASSERT_NE(at, std::string::npos);
  json->replace(at, needle.size(), "\"registers per thread\":300");
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "import_refuses_invalid";
  std::filesystem::create_directories(dir);
  const std::string in = (dir / "bad.json").string();
  const std::string out = (dir / "bad.trace.gz").string();
  ASSERT_TRUE(WriteFileAtomically(in, *json).ok());
  CliRun run = Habitat({"import-kineto", in, out, "--batch-size", "64"});
  EXPECT_EQ(run.code, kExitFailure) << run.err;
  EXPECT_THAT(run.err, HasSubstr("registers_per_thread"));
  EXPECT_THAT(run.err, HasSubstr("was not written"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The trace's own batch is --traced-batch-size in import-kineto as in
// predict (whose --batch-size is the batch to predict at); the old name
// still works, with a note.
TEST(CliCommandsTest, ImportTakesTheTracedBatchByPredictsName) {
  const std::string in = std::string(HABITAT_TESTDATA_DIR) + "/kineto/h100/dcgan_b64_fp32.json.gz";
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "import_batch";
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "dcgan.trace.gz").string();
  CliRun named = Habitat({"import-kineto", in, out, "--traced-batch-size", "64"});
  EXPECT_EQ(named.code, kExitOk) << named.err;
  EXPECT_THAT(named.err, Not(HasSubstr("--batch-size")));
  CliRun old = Habitat({"import-kineto", in, out, "--batch-size", "64"});
  EXPECT_EQ(old.code, kExitOk) << old.err;
  EXPECT_THAT(old.err, HasSubstr("now spelled --traced-batch-size"));
  CliRun both =
      Habitat({"import-kineto", in, out, "--batch-size", "64", "--traced-batch-size", "64"});
  EXPECT_EQ(both.code, kExitUsage);
}

TEST(CliCommandsTest, BreakdownAndTopInEveryFormat) {
  const std::string trace = AgentTrace();
  CliRun top_alone = Habitat({"predict", trace, "--devices", "T4", "--top", "2"});
  EXPECT_EQ(top_alone.code, kExitUsage);
  EXPECT_THAT(top_alone.err, HasSubstr("--top N limits --breakdown"));
  CliRun csv = Habitat({"predict", trace, "--devices", "T4", "--format", "csv", "--breakdown"});
  EXPECT_EQ(csv.code, kExitUsage);
  EXPECT_THAT(csv.err, HasSubstr("no per-operation breakdown"));
  CliRun json = Habitat(
      {"predict", trace, "--devices", "T4,L4", "--format", "json", "--breakdown", "--top", "2"});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  size_t operations = 0;
  for (size_t at = json.out.find("\"index\":"); at != std::string::npos;
       at = json.out.find("\"index\":", at + 1)) {
    ++operations;
  }
  EXPECT_EQ(operations, 4u);  // two GPUs, two operations each
}

TEST(CliCommandsTest, DevicesAndCatalogsInEveryFormat) {
  CliRun table = Habitat({"devices"});
  ASSERT_EQ(table.code, kExitOk) << table.err;
  EXPECT_THAT(table.out, HasSubstr("H100-SXM"));
  CliRun csv = Habitat({"devices", "--format", "csv"});
  ASSERT_EQ(csv.code, kExitOk);
  EXPECT_THAT(csv.out, StartsWith("id,display_name,"));
  CliRun json = Habitat({"devices", "--format=json", "--include-test-only"});
  ASSERT_EQ(json.code, kExitOk);
  EXPECT_THAT(json.out, HasSubstr("\"peak_bf16_tensor_tflops\""));
  CliRun catalogs = Habitat({"catalogs", "--format", "csv"});
  ASSERT_EQ(catalogs.code, kExitOk) << catalogs.err;
  EXPECT_THAT(catalogs.out, HasSubstr("\naws,"));
}

// The agent recorded this trace's memory (ResNet-50 at batch 16, H100).
TEST(CliCommandsTest, FitPrintsEachGpusLargestBatchRankedByCost) {
  CliRun table =
      Habitat({"predict", AgentTraceWithMemory(), "--devices", "T4,L4,H100-SXM", "--fit"});
  ASSERT_EQ(table.code, kExitOk) << table.err;
  EXPECT_THAT(table.out, HasSubstr("batch fitted per GPU (traced at 16)"));
  EXPECT_THAT(table.out, HasSubstr(" GiB "));
  EXPECT_THAT(table.out, HasSubstr("GiB: predicted peak"));
  EXPECT_THAT(table.out, HasSubstr("batch: the largest batch"));
  // The rows are in cost order and the first column is that rank: 1, 2, 3
  // down the page, and the legend says so.
  EXPECT_THAT(table.out, HasSubstr("\ncost# GPU"));
  EXPECT_THAT(table.out, HasSubstr("rows in cost# order; time#: rank by wall time"));
  // The three GPUs' rows follow the header; their first words.
  std::istringstream rows(table.out.substr(table.out.find("\ncost# GPU") + 1));
  std::string line;
  std::getline(rows, line);
  std::vector<std::string> first;
  for (int i = 0; i < 3 && std::getline(rows, line); ++i) {
    std::istringstream(line) >> line;
    first.push_back(line);
  }
  EXPECT_EQ(first, (std::vector<std::string>{"1", "2", "3"})) << table.out;
  CliRun csv = Habitat(
      {"predict", AgentTraceWithMemory(), "--devices", "T4,H100-SXM", "--fit", "--format", "csv"});
  ASSERT_EQ(csv.code, kExitOk) << csv.err;
  EXPECT_THAT(csv.out, HasSubstr(",fits_memory,largest_fitting_batch\n"));
  EXPECT_THAT(csv.out, HasSubstr(",true,"));

  CliRun no_fit = Habitat({"predict", AgentTraceWithMemory(), "--fit-step", "8"});
  EXPECT_EQ(no_fit.code, kExitUsage);
  EXPECT_THAT(no_fit.err, HasSubstr("give both"));
  CliRun both = Habitat({"predict", AgentTraceWithMemory(), "--fit", "--batch-size", "64"});
  EXPECT_EQ(both.code, kExitUsage);
  EXPECT_THAT(both.err, HasSubstr("drop --batch-size"));
  // A trace without memory data cannot be fitted, and says why.
  CliRun memoryless = Habitat({"predict", AgentTrace(), "--fit"});
  EXPECT_EQ(memoryless.code, kExitFailure);
  EXPECT_THAT(memoryless.err, HasSubstr("no memory data"));
}

TEST(CliCommandsTest, GpusAndInstancesAddADataParallelSection) {
  CliRun table = Habitat({"predict", AgentTraceWithMemory(), "--devices", "H100-SXM,A100-SXM-40GB",
                          "--gpus", "8", "--nodes", "2", "--instances"});
  ASSERT_EQ(table.code, kExitOk) << table.err;
  EXPECT_THAT(table.out, HasSubstr("data-parallel steps"));
  EXPECT_THAT(table.out, HasSubstr("8x2"));
  EXPECT_THAT(table.out, HasSubstr("p5.48xlarge"));
  CliRun nodes_alone = Habitat({"predict", AgentTraceWithMemory(), "--nodes", "2"});
  EXPECT_EQ(nodes_alone.code, kExitUsage);
  EXPECT_THAT(nodes_alone.err, HasSubstr("give --gpus N too"));
  CliRun csv = Habitat({"predict", AgentTraceWithMemory(), "--gpus", "8", "--format", "csv"});
  EXPECT_EQ(csv.code, kExitUsage);
  // A named GPU that cannot run it gets its row, with the reason, as it
  // does unnamed (no catalog instance of 8 L4s; no interconnect figures).
  CliRun named = Habitat({"predict", AgentTraceWithMemory(), "--devices", "H100-SXM,L4,RTX4090",
                          "--gpus", "8", "--nodes", "2"});
  ASSERT_EQ(named.code, kExitOk) << named.err;
  // The data-parallel section's line of a GPU.
  auto line = [&named](const std::string& gpu) {
    const size_t section = named.out.find("data-parallel steps");
    const size_t at = named.out.find("\n  " + gpu + " ", section);
    if (section == std::string::npos || at == std::string::npos) return std::string();
    return named.out.substr(at + 1, named.out.find('\n', at + 1) - at - 1);
  };
  EXPECT_THAT(line("L4"), ContainsRegex("^  L4 +8x2~? +-  .*catalog")) << named.out;
  EXPECT_THAT(line("RTX4090"), ContainsRegex("^  RTX4090 +8x2~? +-  ")) << named.out;
  EXPECT_THAT(line("H100-SXM"), ContainsRegex("^  H100-SXM +8x2~? +[0-9]")) << named.out;
}

TEST(CliCommandsTest, NoNvlsCostsTheH100sAllReducesWithoutIt) {
  auto step = [](const std::string& json) {
    const size_t at = json.find("\"step_ns\"");
    return at == std::string::npos ? std::string() : json.substr(at, 30);
  };
  CliRun nvls = Habitat({"predict", AgentTraceWithMemory(), "--devices", "H100-SXM", "--gpus", "8",
                         "--format", "json"});
  CliRun ring = Habitat({"predict", AgentTraceWithMemory(), "--devices", "H100-SXM", "--gpus", "8",
                         "--no-nvls", "--format", "json"});
  ASSERT_EQ(nvls.code, kExitOk) << nvls.err;
  ASSERT_EQ(ring.code, kExitOk) << ring.err;
  EXPECT_THAT(nvls.out, HasSubstr("\"nvls\": true"));
  EXPECT_THAT(ring.out, Not(HasSubstr("\"nvls\": true")));
  EXPECT_NE(step(nvls.out), step(ring.out));
  CliRun alone = Habitat({"predict", AgentTraceWithMemory(), "--no-nvls"});
  EXPECT_EQ(alone.code, kExitUsage);
  EXPECT_THAT(alone.err, HasSubstr("give --gpus N too"));
}

TEST(CliCommandsTest, ParallelFsdpAddsShardedRowsWithMemoryPerGpu) {
  CliRun fsdp = Habitat({"predict", AgentTraceWithMemory(), "--devices", "H100-SXM", "--gpus", "4",
                         "--parallel", "fsdp", "--fsdp-units", "8"});
  ASSERT_EQ(fsdp.code, kExitOk) << fsdp.err;
  EXPECT_THAT(fsdp.out, HasSubstr("DDP or FSDP over NCCL"));
  EXPECT_THAT(fsdp.out, HasSubstr("GiB/GPU"));
  EXPECT_THAT(fsdp.out, ContainsRegex("\n  H100-SXM +4F"));
  CliRun json = Habitat({"predict", AgentTraceWithMemory(), "--devices", "H100-SXM", "--gpus", "4",
                         "--parallel", "FSDP", "--format", "json"});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  EXPECT_THAT(json.out, HasSubstr("\"kind\": \"KIND_FULLY_SHARDED\""));
  EXPECT_THAT(json.out, HasSubstr("\"peak_memory_bytes_per_gpu\""));
  // DDP stays the default and keeps its section unchanged.
  CliRun ddp = Habitat({"predict", AgentTraceWithMemory(), "--devices", "H100-SXM", "--gpus", "4"});
  ASSERT_EQ(ddp.code, kExitOk) << ddp.err;
  EXPECT_THAT(ddp.out, Not(HasSubstr("GiB/GPU")));
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--parallel", "fsdp"},
        {"--gpus", "4", "--parallel", "tp"},
        {"--gpus", "4", "--fsdp-units", "8"},
        {"--gpus", "4", "--fsdp-wrap", "GPT2Block"},
        {"--gpus", "4", "--parallel", "fsdp", "--fsdp-units", "8", "--fsdp-wrap", "GPT2Block"}}) {
    std::vector<std::string> args = {"predict", AgentTraceWithMemory()};
    args.insert(args.end(), bad.begin(), bad.end());
    CliRun run = Habitat(args);
    EXPECT_EQ(run.code, kExitUsage) << bad[0] << " " << bad[1];
  }
}

// A trace with its modules is wrapped per block, or by the class named; a
// class it lacks is refused with the classes it has.
TEST(CliCommandsTest, FsdpWrapCutsUnitsByModuleClass) {
  const std::string trace = AgentTraceWithModules();
  CliRun block = Habitat({"predict", trace, "--devices", "H200", "--gpus", "2", "--parallel",
                          "fsdp", "--fsdp-wrap", "GPT2Block", "--format", "json", "-q"});
  ASSERT_EQ(block.code, kExitOk) << block.err;
  EXPECT_THAT(block.out, HasSubstr("\"fsdp_units\": 25"));
  CliRun missing = Habitat({"predict", trace, "--devices", "H200", "--gpus", "2", "--parallel",
                            "fsdp", "--fsdp-wrap", "GPT2Blok"});
  EXPECT_NE(missing.code, kExitOk);
  EXPECT_THAT(missing.err, HasSubstr("no module of class 'GPT2Blok'"));
  EXPECT_THAT(missing.err, HasSubstr("GPT2Block"));
}

// --fit with FSDP predicts each GPU at the batch that fits it sharded, and
// the legend says so; a configuration that fits no batch is marked '!'.
TEST(CliCommandsTest, FitWithFsdpFitsTheShards) {
  CliRun fit = Habitat({"predict", AgentTraceWithMemory(), "--devices", "H100-SXM,T4", "--gpus",
                        "4", "--parallel", "fsdp", "--fit"});
  ASSERT_EQ(fit.code, kExitOk) << fit.err;
  EXPECT_THAT(fit.out, HasSubstr("batch: the largest batch per GPU whose predicted peak fits each "
                                 "GPU of the first\n         FSDP configuration below"));
  EXPECT_THAT(fit.out, HasSubstr("GiB/GPU"));
  CliRun json = Habitat({"predict", AgentTraceWithMemory(), "--devices", "H100-SXM", "--gpus", "4",
                         "--parallel", "fsdp", "--fit", "--format", "json"});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  EXPECT_THAT(json.out, HasSubstr("\"largest_fitting_batch\""));
  EXPECT_THAT(json.out, HasSubstr("\"fits_memory\": true"));
  EXPECT_THAT(json.out, HasSubstr("\"fewest_gpus_to_fit\": 1"));
}

// The table goes to stdout, its warnings to stderr: one line per kind of
// warning (as many as the JSON's structured_warnings), naming its GPUs.
TEST(CliCommandsTest, WarningsAreOneLinePerKindOnStderr) {
  CliRun table = HabitatWithModels(Gpt2Lambda());
  ASSERT_EQ(table.code, kExitOk) << table.err;
  EXPECT_THAT(table.out, HasSubstr("H100-SXM*"));
  EXPECT_THAT(table.out, Not(HasSubstr("warning")));
  EXPECT_THAT(table.out, Not(HasSubstr("datasheet peak")));
  CliRun json = HabitatWithModels(With(Gpt2Lambda(), {"--format", "json"}));
  ASSERT_EQ(json.code, kExitOk) << json.err;
  const int kinds = Count(json.out, "\"kind\": ");
  ASSERT_GE(kinds, 5) << "structured_warnings in the JSON";
  const std::vector<std::string> lines = WarningLines(table.err);
  ASSERT_FALSE(lines.empty()) << table.err;
  EXPECT_THAT(lines[0], StartsWith("warnings (--explain"));
  // The header, then one item per kind, each a GPU list and one sentence,
  // wrapped within 100 columns (the rest of an item indented by 4).
  int items = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_THAT(lines[i], StartsWith("  ")) << lines[i];
    EXPECT_LE(Columns(lines[i]), 100u) << lines[i];
    if (lines[i].rfind("   ", 0) != 0) {
      ++items;
    } else {
      EXPECT_THAT(lines[i], StartsWith("    ")) << lines[i];
      EXPECT_THAT(lines[i], Not(StartsWith("     "))) << lines[i];
    }
  }
  EXPECT_EQ(items, kinds) << table.err;
  // All GPUs but two lack the model's training data (in bf16 or fp32);
  // eight lack bf16 tensor cores; twelve had operations raised to a limit.
  const std::string err = Unwrapped(table.err);
  EXPECT_EQ(Count(err, "extrapolated beyond its training data"), 1) << err;
  EXPECT_THAT(err,
              HasSubstr("\n  11 GPUs (A100-PCIE-80GB, RTX3090, A10G, V100-SXM2, V100-PCIE-32GB "
                        "and 6 more): the kernel-varying model extrapolated beyond its "
                        "training data"));
  EXPECT_THAT(err, HasSubstr("\n  8 GPUs (V100-SXM2, V100-PCIE-32GB, RTX2080Ti, P100, RTX2070 "
                             "and 3 more): no tensor cores for the origin's math mode"));
  EXPECT_EQ(Count(err, "raised to the GPU's datasheet peak"), 1) << err;
  EXPECT_EQ(Count(err, "moved by its roofline and SM count x clock"), 1) << err;
  EXPECT_THAT(err, HasSubstr("\n  V100-SXM2: some operations were predicted on a same-chip"));
  // JSON and CSV print no warnings on stderr: they carry them.
  EXPECT_THAT(json.err, Not(HasSubstr("warning")));
  EXPECT_THAT(json.out, HasSubstr("\"structured_warnings\": ["));
  EXPECT_THAT(json.out, HasSubstr("were raised to that limit (at_hardware_limit)"));
}

TEST(CliCommandsTest, QuietPrintsNoWarningsOrNotes) {
  CliRun plain = HabitatWithModels(Gpt2Lambda());
  ASSERT_EQ(plain.code, kExitOk) << plain.err;
  EXPECT_THAT(plain.err, HasSubstr("note: batch size 8 inferred"));
  for (const char* flag : {"-q", "--quiet"}) {
    CliRun quiet = HabitatWithModels(With(Gpt2Lambda(), {flag}));
    ASSERT_EQ(quiet.code, kExitOk) << flag << ": " << quiet.err;
    EXPECT_EQ(quiet.out, plain.out) << flag;
    EXPECT_THAT(quiet.err, IsEmpty()) << flag;
  }
  // Errors still reach stderr.
  CliRun failed = HabitatWithModels({"predict", "-q", "no_such_trace.pb"});
  EXPECT_EQ(failed.code, kExitFailure);
  EXPECT_THAT(failed.err, HasSubstr("no_such_trace.pb"));
  CliRun devices = Habitat({"devices", "-q"});
  EXPECT_EQ(devices.code, kExitUsage);
  EXPECT_THAT(devices.err, HasSubstr("unknown option '-q'"));
}

TEST(CliCommandsTest, ExplainPrintsEachWarningInFull) {
  CliRun summary = HabitatWithModels(Gpt2Lambda());
  CliRun explained = HabitatWithModels(With(Gpt2Lambda(), {"--explain"}));
  ASSERT_EQ(explained.code, kExitOk) << explained.err;
  EXPECT_EQ(explained.out, summary.out);
  // The full texts, with their numbers, only with --explain.
  const std::string full = "were raised to that limit (at_hardware_limit)";
  EXPECT_THAT(summary.err, Not(HasSubstr(full)));
  EXPECT_THAT(explained.err, HasSubstr(full));
  EXPECT_THAT(explained.err, HasSubstr("[hardware_limit]"));
  EXPECT_THAT(explained.err, HasSubstr("    - 2 GPUs (RTX4090, RTX3090): 12 operation(s), 2.5%"));
  // Each detail names all of its GPUs.
  EXPECT_THAT(explained.err, HasSubstr("    - 8 GPUs (V100-SXM2, V100-PCIE-32GB, RTX2080Ti, P100, "
                                       "RTX2070, T4, P4000, P4): 61 operation(s)"));
  // Each kind's line as without --explain (wrapped), then its details.
  for (const std::string& line : WarningLines(summary.err)) {
    if (line.rfind("  ", 0) != 0 || line.rfind("   ", 0) == 0) continue;
    EXPECT_THAT(explained.err, HasSubstr(line.substr(0, 60))) << line;
  }
  for (const std::string& line : WarningLines(explained.err)) {
    EXPECT_LE(Columns(line), 100u) << line;
  }
  CliRun with_quiet = HabitatWithModels(With(Gpt2Lambda(), {"--explain", "-q"}));
  EXPECT_EQ(with_quiet.code, kExitUsage);
  EXPECT_THAT(with_quiet.err, HasSubstr("not both"));
  CliRun with_csv = HabitatWithModels(With(Gpt2Lambda(), {"--explain", "--format", "csv"}));
  EXPECT_EQ(with_csv.code, kExitUsage);
  EXPECT_THAT(with_csv.err, HasSubstr("--explain"));
}

// The default table, and those of the README's examples, fit in 100
// columns.
TEST(CliCommandsTest, TablesFitIn100Columns) {
  const std::string resnet =
      std::string(HABITAT_TESTDATA_DIR) + "/kineto/h100/resnet50_b16_fp32.json.gz";
  const std::string transformer =
      std::string(HABITAT_TESTDATA_DIR) + "/agent_suite/h100_memory/transformer_b32_fp32.trace.gz";
  const std::vector<std::vector<std::string>> runs = {
      Gpt2Lambda(),
      {"predict", std::string(HABITAT_TESTDATA_DIR) + "/kineto/h100/gpt2_b8_bf16.json.gz"},
      {"predict", resnet, "--catalog", "aws"},
      {"predict", resnet, "--batch-size", "128"},
      {"predict", AgentTraceWithMemory(), "--fit"},
      {"predict", AgentTraceWithMemory(), "--fit", "--catalog", "lambda"},
      {"predict", transformer, "--gpus", "8", "--nodes", "2"},
      {"predict", transformer, "--gpus", "8", "--parallel", "fsdp"},
      {"predict", resnet, "--devices", "A100-SXM-80GB,H200,T4", "--breakdown", "--top", "5"},
  };
  for (const auto& args : runs) {
    CliRun run = HabitatWithModels(args);
    ASSERT_EQ(run.code, kExitOk) << args[1] << ": " << run.err;
    // The table and, on stderr, its notes and warnings.
    for (const std::string& line : Lines(run.out + run.err)) {
      EXPECT_LE(Columns(line), 100u) << args[1] << " " << (args.size() > 2 ? args[2] : "") << ":\n"
                                     << line;
    }
  }
}

}  // namespace
}  // namespace habitat
