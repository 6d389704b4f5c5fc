// The `habitat` subcommands run in-process on the real data directory:
// exit codes, usage errors and the messages people see. Predictions on real
// traces are covered by tests/golden.
#include "client/cli_commands.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun Habitat(std::vector<std::string> args) {
  CliEnvironment env;
  env.default_data_dir = HABITAT_DATA_DIR;
  env.version = "test";
  std::ostringstream out, err;
  const int code = RunHabitatCli(args, env, out, err);
  return {code, out.str(), err.str()};
}

// A habitat trace the agent recorded at batch 32 on an H100.
std::string AgentTrace() {
  return std::string(HABITAT_TESTDATA_DIR) + "/agent_suite/h100/resnet50_b32_fp32.trace.gz";
}

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
// (scaled, with the warning); relabelling the traced batch is refused.
TEST(CliCommandsTest, AnotherBatchIsPredictedAndTheTracedOneIsNotRelabelled) {
  const std::string trace = AgentTrace();
  CliRun other = Habitat({"predict", trace, "--batch-size", "64", "--devices", "H200"});
  EXPECT_EQ(other.code, kExitOk) << other.err;
  EXPECT_THAT(other.out, HasSubstr("batch 64"));
  EXPECT_THAT(other.out + other.err, HasSubstr("predicted at batch 64 from a trace at batch 32"));
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
std::string AgentTraceWithMemory() {
  return std::string(HABITAT_TESTDATA_DIR) + "/agent_suite/h100_memory/resnet50_b16_fp32.trace.gz";
}

TEST(CliCommandsTest, FitPrintsEachGpusLargestBatchRankedByCost) {
  CliRun table =
      Habitat({"predict", AgentTraceWithMemory(), "--devices", "T4,L4,H100-SXM", "--fit"});
  ASSERT_EQ(table.code, kExitOk) << table.err;
  EXPECT_THAT(table.out, HasSubstr("batch per GPU, the largest that fits (traced at 16)"));
  EXPECT_THAT(table.out, HasSubstr("peak GiB"));
  EXPECT_THAT(table.out, HasSubstr("batch: the largest batch"));
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

// --plot runs the Python client's plotter: the package from this tree, with
// matplotlib (Debian's python3-matplotlib in CI).
TEST(CliCommandsTest, PlotDrawsThroughThePythonClientOrSaysWhatIsMissing) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "habitat_plot";
  std::filesystem::create_directories(dir);
  CliRun bad_suffix = Habitat({"predict", AgentTraceWithMemory(), "--plot", "out.pdf"});
  EXPECT_EQ(bad_suffix.code, kExitUsage);
  EXPECT_THAT(bad_suffix.err, HasSubstr("FILE.svg or FILE.png"));

  ::setenv("HABITAT_PYTHON", "/nonexistent/python3", 1);
  CliRun no_python = Habitat({"predict", AgentTraceWithMemory(), "--devices", "T4,H100-SXM",
                              "--plot", (dir / "never.svg").string()});
  EXPECT_EQ(no_python.code, kExitFailure);
  EXPECT_THAT(no_python.err, HasSubstr("pip install"));
  EXPECT_FALSE(std::filesystem::exists(dir / "never.svg"));
  ::unsetenv("HABITAT_PYTHON");

  // Debian's interpreter, which has python3-matplotlib, whatever python3
  // comes first on PATH.
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with matplotlib is not installed";
  }
  ::setenv("HABITAT_PYTHON", "/usr/bin/python3", 1);
  const std::string client = std::string(HABITAT_TESTDATA_DIR) + "/../../client/python";
  ::setenv("PYTHONPATH", client.c_str(), 1);
  const std::string svg = (dir / "fit.svg").string();
  CliRun plotted = Habitat({"predict", AgentTraceWithMemory(), "--fit", "--devices",
                            "T4,L4,A100-SXM-40GB,H100-SXM,H200", "--plot", svg});
  ASSERT_EQ(plotted.code, kExitOk) << plotted.err;
  EXPECT_THAT(plotted.err, HasSubstr("plot written to"));
  EXPECT_THAT(plotted.out, HasSubstr("peak GiB"));
  auto drawn = ReadFile(svg);
  ASSERT_TRUE(drawn.ok()) << drawn.status();
  EXPECT_THAT(*drawn, HasSubstr("<svg"));
  EXPECT_THAT(*drawn, HasSubstr("A100-SXM-40GB"));
  ::unsetenv("HABITAT_PYTHON");
  ::unsetenv("PYTHONPATH");
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
  CliRun named =
      Habitat({"predict", AgentTraceWithMemory(), "--devices", "RTX4090", "--gpus", "8"});
  EXPECT_EQ(named.code, kExitFailure);
  EXPECT_THAT(named.err, HasSubstr("interconnect"));
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

}  // namespace
}  // namespace habitat
