#include "core/kernel_varying/kernel_varying_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "core/kernel_varying/features.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace kernel_varying {

namespace {

using nlohmann::json;

// Normal prediction with all trees. cache_id is not optional in XGBoost
// 1.7's in-place prediction (a missing key fails with "Invalid cast, from
// Null to Integer"); no value is missing, as the features are checked
// finite.
constexpr char kPredictConfig[] =
    R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, )"
    R"("strict_shape": false, "missing": NaN, "cache_id": 0})";

// XGBoost's last error on this thread, without the stack trace it appends.
std::string LastXgboostError() {
  std::string message = XGBGetLastError();
  const size_t trace = message.find("\nStack trace:");
  if (trace != std::string::npos) message.resize(trace);
  return std::string(absl::StripTrailingAsciiWhitespace(message));
}

// What manifest.json tells the server beyond the checks.
struct Manifest {
  std::string model_file;
  std::string model_sha256;
  Nanoseconds min_origin_ns = 0;
  double large_gemm_ceiling = 0;
  double large_gemm_typical = 0;
  // GPU ids whose measurements trained each (family, mode).
  std::array<std::array<std::vector<std::string>, kMathModeCount>, kFamilyCount> coverage;
  double default_error_percent = 0;
  // Per target GPU: the expected error per family (NaN where not evaluated).
  absl::flat_hash_map<std::string, std::array<double, kFamilyCount>> error_by_target;
  // The error of moving a pass to another math mode, per origin mode and
  // family (NaN where not measured), and for the rest.
  double mode_change_default_percent = 0;
  std::array<std::array<double, kFamilyCount>, kMathModeCount> mode_change_error;
};

absl::StatusOr<std::string> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return bytes;
}

absl::Status ManifestError(const std::string& path, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

absl::StatusOr<std::vector<std::string>> StringList(const json& doc, const std::string& path,
                                                    absl::string_view field) {
  auto it = doc.find(field);
  if (it == doc.end() || !it->is_array()) {
    return ManifestError(path, absl::StrCat("\"", field, "\" must be an array of strings"));
  }
  std::vector<std::string> out;
  for (const json& v : *it) {
    if (!v.is_string()) {
      return ManifestError(path, absl::StrCat("\"", field, "\" holds a non-string: ", v.dump()));
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

// `field` holds exactly `expected`, in order (what features.h computes).
absl::Status CheckList(const json& doc, const std::string& path, absl::string_view field,
                       const std::vector<std::string>& expected) {
  HABITAT_ASSIGN_OR_RETURN(std::vector<std::string> got, StringList(doc, path, field));
  if (got != expected) {
    return ManifestError(path, absl::StrCat(field, " [", absl::StrJoin(got, ", "),
                                            "] differ from core/kernel_varying's [",
                                            absl::StrJoin(expected, ", "), "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> Percent(const json& value, const std::string& path,
                               absl::string_view where) {
  if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0) {
    return ManifestError(path,
                         absl::StrCat(where, " must be a non-negative number, got ", value.dump()));
  }
  return value.get<double>();
}

absl::Status ParseCoverage(const json& doc, const std::string& path, Manifest* manifest) {
  auto coverage = doc.find("coverage");
  if (coverage == doc.end() || !coverage->is_object()) {
    return ManifestError(path, "no \"coverage\" object (written by models/train.py)");
  }
  for (const auto& [family_name, by_mode] : coverage->items()) {
    auto family = ParseFamily(family_name);
    if (!family.ok()) {
      return ManifestError(path, absl::StrCat("coverage: ", family.status().message()));
    }
    if (!by_mode.is_object()) {
      return ManifestError(path, absl::StrCat("coverage.", family_name, " is not an object"));
    }
    for (const auto& [mode_name, gpus] : by_mode.items()) {
      auto mode = ParseMathMode(mode_name);
      if (!mode.ok()) {
        return ManifestError(path,
                             absl::StrCat("coverage.", family_name, ": ", mode.status().message()));
      }
      if (!gpus.is_array()) {
        return ManifestError(
            path, absl::StrCat("coverage.", family_name, ".", mode_name, " is not an array"));
      }
      auto& ids = manifest->coverage[static_cast<size_t>(*family)][static_cast<size_t>(*mode)];
      for (const json& gpu : gpus) {
        if (!gpu.is_string()) {
          return ManifestError(
              path, absl::StrCat("coverage.", family_name, ".", mode_name, " holds a non-string"));
        }
        ids.push_back(gpu.get<std::string>());
      }
    }
  }
  return absl::OkStatus();
}

// {family: percent} at `where`, NaN for the families it does not name.
absl::StatusOr<std::array<double, kFamilyCount>> ParsePercentsByFamily(const json& by_family,
                                                                       const std::string& path,
                                                                       const std::string& where) {
  if (!by_family.is_object()) return ManifestError(path, absl::StrCat(where, " is not an object"));
  std::array<double, kFamilyCount> percents;
  percents.fill(std::nan(""));
  for (const auto& [family_name, value] : by_family.items()) {
    const std::string at = absl::StrCat(where, ".", family_name);
    auto family = ParseFamily(family_name);
    if (!family.ok()) return ManifestError(path, absl::StrCat(at, ": ", family.status().message()));
    HABITAT_ASSIGN_OR_RETURN(percents[static_cast<size_t>(*family)], Percent(value, path, at));
  }
  return percents;
}

// `object`.default_percent, and `object`.`key` as {name: {family: percent}}
// with each name read by `parse_name` (unknown names are errors).
template <typename Key, typename ParseName, typename Store>
absl::Status ParsePercentTable(const json& object, const std::string& path,
                               const std::string& where, const char* key, double* default_percent,
                               ParseName parse_name, Store store) {
  auto fallback = object.find("default_percent");
  if (fallback == object.end()) {
    return ManifestError(path, absl::StrCat(where, " has no \"default_percent\""));
  }
  HABITAT_ASSIGN_OR_RETURN(*default_percent,
                           Percent(*fallback, path, absl::StrCat(where, ".default_percent")));
  auto table = object.find(key);
  if (table == object.end()) return absl::OkStatus();
  if (!table->is_object()) {
    return ManifestError(path, absl::StrCat(where, ".", key, " is not an object"));
  }
  for (const auto& [name, by_family] : table->items()) {
    const std::string at = absl::StrCat(where, ".", key, ".", name);
    absl::StatusOr<Key> parsed = parse_name(name);
    if (!parsed.ok()) return ManifestError(path, absl::StrCat(at, ": ", parsed.status().message()));
    HABITAT_ASSIGN_OR_RETURN(auto percents, ParsePercentsByFamily(by_family, path, at));
    store(*parsed, percents);
  }
  return absl::OkStatus();
}

absl::Status ParseExpectedError(const json& doc, const std::string& path, Manifest* manifest) {
  auto expected = doc.find("expected_error");
  if (expected == doc.end() || !expected->is_object()) {
    return ManifestError(path,
                         "no \"expected_error\" object (models/train.py writes it from "
                         "--eval's results)");
  }
  HABITAT_RETURN_IF_ERROR(ParsePercentTable<std::string>(
      *expected, path, "expected_error", "by_target", &manifest->default_error_percent,
      [](const std::string& gpu) -> absl::StatusOr<std::string> { return gpu; },
      [manifest](const std::string& gpu, const std::array<double, kFamilyCount>& percents) {
        manifest->error_by_target[gpu] = percents;
      }));
  // The error of moving a pass to another math mode (models/mode_change.py).
  auto mode_change = expected->find("mode_change");
  if (mode_change == expected->end() || !mode_change->is_object()) {
    return ManifestError(path,
                         "expected_error has no \"mode_change\" object (models/train.py writes "
                         "it with models/mode_change.py)");
  }
  for (auto& by_family : manifest->mode_change_error) by_family.fill(std::nan(""));
  return ParsePercentTable<MathMode>(
      *mode_change, path, "expected_error.mode_change", "by_origin_mode",
      &manifest->mode_change_default_percent,
      [](const std::string& mode) { return ParseMathMode(mode); },
      [manifest](MathMode mode, const std::array<double, kFamilyCount>& percents) {
        manifest->mode_change_error[static_cast<size_t>(mode)] = percents;
      });
}

absl::Status ParseManifest(const std::string& path, const std::string& text, Manifest* manifest) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return ManifestError(path, "not a JSON object");
  }
  auto version = doc.find("feature_version");
  if (version == doc.end() || !version->is_number_integer() ||
      version->get<int64_t>() != kFeatureVersion) {
    return ManifestError(path, absl::StrCat("feature_version is ",
                                            version == doc.end() ? "missing" : version->dump(),
                                            ", this build computes version ", kFeatureVersion,
                                            " (core/kernel_varying/features.h)"));
  }
  HABITAT_RETURN_IF_ERROR(CheckList(doc, path, "feature_names", FeatureNames()));
  std::vector<std::string> families, modes;
  for (Family f : kAllFamilies) families.emplace_back(FamilyName(f));
  for (MathMode m : kAllMathModes) modes.emplace_back(MathModeName(m));
  HABITAT_RETURN_IF_ERROR(CheckList(doc, path, "families", families));
  HABITAT_RETURN_IF_ERROR(CheckList(doc, path, "modes", modes));

  auto min_ns = doc.find("min_origin_ns");
  if (min_ns == doc.end() || !min_ns->is_number() || !(min_ns->get<double>() >= 0) ||
      min_ns->get<double>() > 1e15) {
    return ManifestError(path, "\"min_origin_ns\" must be a non-negative number");
  }
  manifest->min_origin_ns = static_cast<Nanoseconds>(std::llround(min_ns->get<double>()));

  // Below 1 it would put predictions under the sustained roofline.
  auto ceiling = doc.find("large_gemm_ceiling");
  if (ceiling == doc.end() || !ceiling->is_number() || !(ceiling->get<double>() >= 1) ||
      !std::isfinite(ceiling->get<double>())) {
    return ManifestError(path, "\"large_gemm_ceiling\" must be a finite number >= 1");
  }
  manifest->large_gemm_ceiling = ceiling->get<double>();
  auto typical = doc.find("large_gemm_typical");
  if (typical == doc.end() || !typical->is_number() || !(typical->get<double>() >= 1) ||
      !(typical->get<double>() <= manifest->large_gemm_ceiling)) {
    return ManifestError(path,
                         "\"large_gemm_typical\" must be a number in [1, large_gemm_ceiling]");
  }
  manifest->large_gemm_typical = typical->get<double>();

  auto file = doc.find("model_file");
  if (file == doc.end() || !file->is_string() || file->get<std::string>().empty() ||
      absl::StrContains(file->get<std::string>(), '/')) {
    return ManifestError(path, "\"model_file\" must name a file next to the manifest");
  }
  manifest->model_file = file->get<std::string>();
  auto sha = doc.find("model_sha256");
  if (sha == doc.end() || !sha->is_string() || sha->get<std::string>().size() != 64) {
    return ManifestError(path, "\"model_sha256\" must be 64 hex digits");
  }
  manifest->model_sha256 = absl::AsciiStrToLower(sha->get<std::string>());
  HABITAT_RETURN_IF_ERROR(ParseCoverage(doc, path, manifest));
  return ParseExpectedError(doc, path, manifest);
}

// Owns one booster handle.
struct BoosterDeleter {
  void operator()(void* handle) const { XGBoosterFree(handle); }
};
using Booster = std::unique_ptr<void, BoosterDeleter>;

absl::StatusOr<std::vector<double>> Predict(BoosterHandle booster, const float* rows_flat,
                                            size_t rows) {
  // NumPy's __array_interface__ (version 3): address, read-only flag,
  // row-major shape, little-endian float32.
  const std::string array = absl::StrCat(R"({"data": [)", reinterpret_cast<uintptr_t>(rows_flat),
                                         R"(, true], "shape": [)", rows, ", ", kFeatureCount,
                                         R"(], "typestr": "<f4", "version": 3})");
  const bst_ulong* shape = nullptr;
  bst_ulong dims = 0;
  const float* result = nullptr;
  if (XGBoosterPredictFromDense(booster, array.c_str(), kPredictConfig, nullptr, &shape, &dims,
                                &result) != 0) {
    return absl::InternalError(
        absl::StrCat("kernel-varying model: XGBoost prediction failed: ", LastXgboostError()));
  }
  bst_ulong values = 1;
  for (bst_ulong d = 0; d < dims; ++d) values *= shape[d];
  if (values != rows) {
    return absl::InternalError(absl::StrCat("kernel-varying model: XGBoost returned ", values,
                                            " values for ", rows, " rows"));
  }
  // `result` is XGBoost's thread-local buffer: copy it before the next call.
  return std::vector<double>(result, result + rows);
}

// Loads the booster from the model file's bytes (gzipped or not: XGBoost
// reads JSON and UBJSON from a buffer) and checks that it takes our
// features.
absl::StatusOr<Booster> LoadBooster(const std::string& model_path, const std::string& bytes) {
  std::string raw = bytes;
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
      static_cast<unsigned char>(bytes[1]) == 0x8b) {
    absl::StatusOr<std::string> inflated = Gunzip(bytes);
    if (!inflated.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(model_path, ": not a gzip file: ", inflated.status().message()));
    }
    raw = *std::move(inflated);
  }
  BoosterHandle handle = nullptr;
  if (XGBoosterCreate(nullptr, 0, &handle) != 0) {
    return absl::InternalError(
        absl::StrCat(model_path, ": cannot create an XGBoost booster: ", LastXgboostError()));
  }
  Booster booster(handle);
  // Both JSON and UBJSON start with '{'; XGBoost would read anything else
  // as its deprecated binary format.
  if (raw.empty() || raw[0] != '{' ||
      XGBoosterLoadModelFromBuffer(handle, raw.data(), raw.size()) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_path, ": not an XGBoost model (JSON or UBJSON)",
        raw.empty() || raw[0] != '{' ? std::string() : absl::StrCat(": ", LastXgboostError())));
  }
  // One thread per prediction: the server runs requests in parallel, and a
  // request's batch is small.
  if (XGBoosterSetParam(handle, "nthread", "1") != 0) {
    return absl::InternalError(absl::StrCat(model_path, ": ", LastXgboostError()));
  }
  bst_ulong features = 0;
  if (XGBoosterGetNumFeature(handle, &features) != 0 || features != kFeatureCount) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_path, ": the model takes ", features,
                     " features, core/kernel_varying/features.h computes ", kFeatureCount));
  }
  // The first prediction configures the learner; do it here, on one thread,
  // so that predictions proper only read the model (XGBoost documents tree
  // models' prediction as thread-safe).
  const std::vector<float> zeros(kFeatureCount, 0.0f);
  HABITAT_RETURN_IF_ERROR(Predict(handle, zeros.data(), 1).status());
  return booster;
}

}  // namespace

struct KernelVaryingModel::Impl {
  // Read-only after Load: concurrent calls are safe.
  Booster booster;
  Manifest manifest;
};

KernelVaryingModel::KernelVaryingModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KernelVaryingModel::~KernelVaryingModel() = default;

absl::StatusOr<std::unique_ptr<KernelVaryingModel>> KernelVaryingModel::Load(
    const std::string& model_dir) {
  auto impl = std::make_unique<Impl>();
  const std::string manifest_path = model_dir + "/manifest.json";
  HABITAT_ASSIGN_OR_RETURN(std::string manifest_text, ReadBytes(manifest_path));
  HABITAT_RETURN_IF_ERROR(ParseManifest(manifest_path, manifest_text, &impl->manifest));

  const std::string model_path = model_dir + "/" + impl->manifest.model_file;
  HABITAT_ASSIGN_OR_RETURN(std::string model_bytes, ReadBytes(model_path));
  const std::string sha = Sha256Hex(model_bytes);
  if (sha != impl->manifest.model_sha256) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_path, ": sha256 ", sha, " differs from model_sha256 ", impl->manifest.model_sha256,
        " in ", manifest_path, " (model and manifest are from different training runs)"));
  }
  HABITAT_ASSIGN_OR_RETURN(impl->booster, LoadBooster(model_path, model_bytes));
  return std::unique_ptr<KernelVaryingModel>(new KernelVaryingModel(std::move(impl)));
}

absl::StatusOr<std::vector<double>> KernelVaryingModel::PredictLog2Corrections(
    const std::vector<float>& rows_flat, size_t rows) const {
  if (rows_flat.size() / kFeatureCount != rows || rows_flat.size() % kFeatureCount != 0) {
    return absl::InvalidArgumentError(absl::StrCat("kernel-varying model input has ",
                                                   rows_flat.size(), " values, expected ", rows,
                                                   " rows of ", kFeatureCount));
  }
  for (size_t i = 0; i < rows_flat.size(); ++i) {
    if (!std::isfinite(rows_flat[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel-varying model input row ", i / kFeatureCount, " feature ",
                       FeatureNames()[i % kFeatureCount], " is ", rows_flat[i]));
    }
  }
  if (rows == 0) return std::vector<double>();
  HABITAT_ASSIGN_OR_RETURN(std::vector<double> out,
                           Predict(impl_->booster.get(), rows_flat.data(), rows));
  for (size_t r = 0; r < rows; ++r) {
    if (!std::isfinite(out[r])) {
      return absl::InternalError(
          absl::StrCat("kernel-varying model returned ", out[r], " for row ", r));
    }
  }
  return out;
}

bool KernelVaryingModel::TrainedOn(Family family, MathMode mode, absl::string_view gpu_id) const {
  const auto& ids =
      impl_->manifest.coverage[static_cast<size_t>(family)][static_cast<size_t>(mode)];
  return std::find(ids.begin(), ids.end(), gpu_id) != ids.end();
}

double KernelVaryingModel::ExpectedErrorPercent(Family family,
                                                absl::string_view target_gpu_id) const {
  auto it = impl_->manifest.error_by_target.find(target_gpu_id);
  if (it != impl_->manifest.error_by_target.end()) {
    const double percent = it->second[static_cast<size_t>(family)];
    if (!std::isnan(percent)) return percent;
  }
  return impl_->manifest.default_error_percent;
}

double KernelVaryingModel::ModeChangeErrorPercent(Family family, MathMode origin_mode) const {
  const double percent =
      impl_->manifest
          .mode_change_error[static_cast<size_t>(origin_mode)][static_cast<size_t>(family)];
  return std::isnan(percent) ? impl_->manifest.mode_change_default_percent : percent;
}

Nanoseconds KernelVaryingModel::min_origin_ns() const { return impl_->manifest.min_origin_ns; }

double KernelVaryingModel::large_gemm_ceiling() const { return impl_->manifest.large_gemm_ceiling; }

double KernelVaryingModel::large_gemm_typical() const { return impl_->manifest.large_gemm_typical; }

const std::string& KernelVaryingModel::model_sha256() const { return impl_->manifest.model_sha256; }

}  // namespace kernel_varying
}  // namespace habitat
