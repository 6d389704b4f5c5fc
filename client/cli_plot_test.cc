// `habitat predict --plot`: refused before predicting where the catalog has
// no prices, drawn by the Python client's plotter, and a plot that fails
// keeps the table.
#include <cstdlib>
#include <filesystem>

#include "client/cli_commands.h"
#include "client/cli_test_runs.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing_cli::AgentTraceWithMemory;
using testing_cli::CliRun;
using testing_cli::Habitat;

// The plot's x axis is the price: a catalog without the prices asked for is
// a usage error, said before any prediction is printed.
TEST(CliPlotTest, RefusedBeforePredictingWithoutPrices) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "habitat_plot_prices";
  std::filesystem::create_directories(dir);
  // No prices, no plot: said before predicting.
  CliRun unpriced = Habitat({"predict", AgentTraceWithMemory(), "--catalog", "none", "--plot",
                             (dir / "never.svg").string()});
  EXPECT_EQ(unpriced.code, kExitUsage);
  EXPECT_THAT(unpriced.err, HasSubstr("--catalog none has no prices"));
  EXPECT_THAT(unpriced.out, IsEmpty());

  // A catalog without the prices asked for: refused before predicting.
  const std::string unpriced_file = (dir / "unpriced.textproto").string();
  ASSERT_TRUE(WriteFileAtomically(unpriced_file,
                                  "name: \"mine\"\ncurrency: \"USD\"\n"
                                  "prices { device_id: \"T4\" instance_type: \"t\" }\n")
                  .ok());
  CliRun no_prices = Habitat({"predict", AgentTraceWithMemory(), "--catalog-file", unpriced_file,
                              "--plot", (dir / "never.svg").string()});
  EXPECT_EQ(no_prices.code, kExitUsage);
  EXPECT_THAT(no_prices.err, HasSubstr("the --catalog-file catalog has no on-demand prices"));
  EXPECT_THAT(no_prices.out, IsEmpty());
  CliRun no_spot = Habitat({"predict", AgentTraceWithMemory(), "--catalog", "LAMBDA", "--spot",
                            "--plot", (dir / "never.svg").string()});
  EXPECT_EQ(no_spot.code, kExitUsage);
  EXPECT_THAT(no_spot.err, HasSubstr("catalog lambda has no spot prices (drop --spot"));
  EXPECT_THAT(no_spot.out, IsEmpty());
  // Without --catalog, the service's default; here there is none (no aws).
  const std::filesystem::path data = dir / "data_without_default";
  std::filesystem::create_directories(data / "catalogs");
  std::filesystem::copy_file(std::string(HABITAT_DATA_DIR) + "/devices.textproto",
                             data / "devices.textproto",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(std::string(HABITAT_DATA_DIR) + "/catalogs/lambda.textproto",
                             data / "catalogs" / "lambda.textproto",
                             std::filesystem::copy_options::overwrite_existing);
  CliRun no_default = Habitat({"predict", AgentTraceWithMemory(), "--data-dir", data.string(),
                               "--plot", (dir / "never.svg").string()});
  EXPECT_EQ(no_default.code, kExitUsage);
  EXPECT_THAT(no_default.err, HasSubstr("the service has no default catalog"));
  EXPECT_THAT(no_default.out, IsEmpty());
}

// --plot runs the Python client's plotter: the package from this tree, with
// matplotlib (Debian's python3-matplotlib in CI).
TEST(CliPlotTest, DrawsThroughThePythonClientOrSaysWhatIsMissing) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "habitat_plot";
  std::filesystem::create_directories(dir);
  CliRun bad_suffix = Habitat({"predict", AgentTraceWithMemory(), "--plot", "out.pdf"});
  EXPECT_EQ(bad_suffix.code, kExitUsage);
  EXPECT_THAT(bad_suffix.err, HasSubstr("FILE.svg or FILE.png"));

  // A plot that fails keeps the table and says why under it.
  ::setenv("HABITAT_PYTHON", "/nonexistent/python3", 1);
  CliRun no_python = Habitat({"predict", AgentTraceWithMemory(), "--devices", "T4,H100-SXM",
                              "--plot", (dir / "never.svg").string()});
  EXPECT_EQ(no_python.code, kExitOk);
  EXPECT_THAT(no_python.out, HasSubstr("H100-SXM*"));
  EXPECT_THAT(no_python.err, HasSubstr("warning: no plot: "));
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
  // A path the plotter cannot write: its own error, without the install
  // hint (the package is there).
  CliRun unwritable = Habitat({"predict", AgentTraceWithMemory(), "--devices", "T4,H100-SXM",
                               "--plot", (dir / "no_such_dir" / "p.svg").string()});
  EXPECT_EQ(unwritable.code, kExitOk) << unwritable.err;
  EXPECT_THAT(unwritable.err, HasSubstr("cannot write"));
  EXPECT_THAT(unwritable.err, Not(HasSubstr("pip install")));
  const std::string svg = (dir / "fit.svg").string();
  CliRun plotted = Habitat({"predict", AgentTraceWithMemory(), "--fit", "--devices",
                            "T4,L4,A100-SXM-40GB,H100-SXM,H200", "--plot", svg});
  ASSERT_EQ(plotted.code, kExitOk) << plotted.err;
  EXPECT_THAT(plotted.err, HasSubstr("plot written to"));
  EXPECT_THAT(plotted.out, HasSubstr("GiB: predicted peak"));
  auto drawn = ReadFile(svg);
  ASSERT_TRUE(drawn.ok()) << drawn.status();
  EXPECT_THAT(*drawn, HasSubstr("<svg"));
  EXPECT_THAT(*drawn, HasSubstr("A100-SXM-40GB"));
  ::unsetenv("HABITAT_PYTHON");
  ::unsetenv("PYTHONPATH");
}

}  // namespace
}  // namespace habitat
