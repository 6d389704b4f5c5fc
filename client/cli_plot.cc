#include "client/cli_plot.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli_output.h"
#include "common/child_process.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace habitat {
namespace {

constexpr char kInstallHint[] =
    "the plot is drawn by the Python client with matplotlib: pip install "
    "'./client/python[plot]' (or set HABITAT_PYTHON to an interpreter that has both)";

// $HABITAT_PYTHON, else the first executable python3 on PATH.
absl::StatusOr<std::string> PythonInterpreter() {
  if (const char* chosen = getenv("HABITAT_PYTHON"); chosen != nullptr && *chosen != '\0') {
    return std::string(chosen);
  }
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path == nullptr ? "" : path, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/python3");
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::FailedPreconditionError(absl::StrCat("--plot: no python3 on PATH; ", kInstallHint));
}

// A private directory for the plotter's input and messages, removed with
// everything in it when this goes out of scope.
class ScratchDirectory {
 public:
  static absl::StatusOr<ScratchDirectory> Create() {
    const char* tmp = getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/habitat-plot-XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) {
      return ErrnoStatus(errno, "--plot: cannot create a temporary directory");
    }
    return ScratchDirectory(std::move(pattern));
  }
  ScratchDirectory(ScratchDirectory&& other) noexcept : path_(std::move(other.path_)) {
    other.path_.clear();
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ~ScratchDirectory() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  std::string File(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

 private:
  explicit ScratchDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// The catalog that prices `request`, and how to name it in a message:
// nullptr where there is none ("" name) or the service lacks it (a name).
std::pair<const v1::PriceCatalog*, std::string> PricingCatalog(
    const v1::PredictRequest& request, const v1::ListCatalogsResponse& catalogs) {
  if (request.has_inline_catalog()) {
    return {&request.inline_catalog(), "the --catalog-file catalog"};
  }
  const std::string& name =
      request.catalog().empty() ? catalogs.default_catalog() : request.catalog();
  if (name.empty() || absl::EqualsIgnoreCase(name, "none")) return {nullptr, ""};
  for (const v1::PriceCatalog& catalog : catalogs.catalogs()) {
    if (absl::EqualsIgnoreCase(catalog.name(), name)) {
      return {&catalog, absl::StrCat("catalog ", catalog.name())};
    }
  }
  return {nullptr, name};
}

}  // namespace

absl::Status CheckPlotPrices(const v1::PredictRequest& request,
                             const v1::ListCatalogsResponse& catalogs) {
  if (!request.has_inline_catalog() && request.catalog().empty() &&
      !catalogs.has_default_catalog()) {
    return absl::OkStatus();  // an older server: its default is not known
  }
  constexpr char kWhat[] = "--plot draws throughput against price per GPU-hour";
  const auto [catalog, name] = PricingCatalog(request, catalogs);
  if (catalog == nullptr && name.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        kWhat, ", and no catalog prices this prediction (",
        request.catalog().empty() ? "the service has no default catalog" : "--catalog none",
        "): give --catalog NAME ('habitat catalogs' lists them) or --catalog-file FILE"));
  }
  if (catalog == nullptr) return absl::OkStatus();  // Predict names the unknown catalog
  const bool spot = request.price_kind() == v1::PRICE_KIND_SPOT;
  for (const v1::GpuPrice& price : catalog->prices()) {
    if ((spot ? price.spot_per_gpu_hour() : price.on_demand_per_gpu_hour()) > 0) {
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat(kWhat, ", and ", name, " has no ", spot ? "spot" : "on-demand", " prices",
                   spot ? " (drop --spot for on-demand ones)" : "",
                   ": give a catalog with prices ('habitat catalogs' lists them)"));
}

absl::Status CheckPlotPath(const std::string& path) {
  if (absl::EndsWithIgnoreCase(path, ".svg") || absl::EndsWithIgnoreCase(path, ".png")) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--plot writes FILE.svg or FILE.png, got '", path, "'"));
}

absl::Status PlotPrediction(const habitat::v1::PredictResponse& response,
                            const std::string& model_name, const std::string& path) {
  HABITAT_ASSIGN_OR_RETURN(const std::string python, PythonInterpreter());
  HABITAT_ASSIGN_OR_RETURN(const std::string json, FormatJson(response));
  HABITAT_ASSIGN_OR_RETURN(ScratchDirectory scratch, ScratchDirectory::Create());
  const std::string input = scratch.File("prediction.json");
  HABITAT_RETURN_IF_ERROR(WriteFileAtomically(input, json));
  std::vector<std::string> args = {python, "-m", "habitat_client.plot", input, path};
  if (!model_name.empty()) {
    args.push_back("--model");
    args.push_back(model_name);
  }
  ChildOptions options;
  options.stdout_path = options.stderr_path = scratch.File("messages.txt");
  HABITAT_ASSIGN_OR_RETURN(const pid_t pid, StartChild(args, options));
  // -1: it did not exit normally.
  const int code = WaitChild(pid).value_or(-1);
  if (code == 0) return absl::OkStatus();
  auto messages = ReadFile(scratch.File("messages.txt"));
  std::string said = messages.ok() ? *messages : "";
  constexpr size_t kShown = 800;  // the end of a traceback says what failed
  if (said.size() > kShown) said = absl::StrCat("...", said.substr(said.size() - kShown));
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
  // The install hint only where the package is missing; the plotter's own
  // errors (a path it cannot write, no prices, no matplotlib) say theirs.
  const bool missing = absl::StrContains(said, "No module named");
  return absl::FailedPreconditionError(
      absl::StrCat("--plot: ", python, " -m habitat_client.plot exited with ", code,
                   said.empty() ? "" : absl::StrCat(": ", said),
                   missing ? absl::StrCat("; ", kInstallHint) : ""));
}

}  // namespace habitat
