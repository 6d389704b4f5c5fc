#include "core/mlp/kernel_varying_model.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <openssl/sha.h>
#include <torch/script.h>

#include <array>
#include <cmath>
#include <exception>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "core/mlp/features.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace mlp {

namespace {

using nlohmann::json;

// What manifest.json tells the server beyond the checks.
struct Manifest {
  std::vector<std::string> trained_gpus;
  std::array<std::vector<Precision>, kFamilyCount> trained_precisions;
  Nanoseconds min_origin_ns = 0;
  std::string model_sha256;
};

absl::StatusOr<std::string> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return bytes;
}

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

absl::Status ManifestError(const std::string& path, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

absl::StatusOr<std::vector<std::string>> StringList(const json& doc, const std::string& path,
                                                    const char* field) {
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

// Checks the manifest against features.h and fills `impl` (not the module).
absl::Status ParseManifest(const std::string& path, const std::string& text, Manifest* impl) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return ManifestError(path, "not a JSON object");
  }
  auto version = doc.find("feature_version");
  if (version == doc.end() || !version->is_number_integer() ||
      version->get<int64_t>() != kFeatureVersion) {
    return ManifestError(
        path,
        absl::StrCat("feature_version is ", version == doc.end() ? "missing" : version->dump(),
                     ", this build computes version ", kFeatureVersion, " (core/mlp/features.h)"));
  }
  HABITAT_ASSIGN_OR_RETURN(std::vector<std::string> names, StringList(doc, path, "feature_names"));
  if (names != FeatureNames()) {
    return ManifestError(path, absl::StrCat("feature_names [", absl::StrJoin(names, ", "),
                                            "] differ from core/mlp/features.h's [",
                                            absl::StrJoin(FeatureNames(), ", "), "]"));
  }
  HABITAT_ASSIGN_OR_RETURN(std::vector<std::string> families, StringList(doc, path, "families"));
  std::vector<std::string> ours;
  for (Family f : kAllFamilies) ours.emplace_back(FamilyName(f));
  if (families != ours) {
    return ManifestError(path, absl::StrCat("families [", absl::StrJoin(families, ", "),
                                            "] differ from [", absl::StrJoin(ours, ", "), "]"));
  }
  auto min_ns = doc.find("min_origin_ns");
  if (min_ns == doc.end() || !min_ns->is_number() || !(min_ns->get<double>() >= 0) ||
      min_ns->get<double>() > 1e15) {
    return ManifestError(path, "\"min_origin_ns\" must be a non-negative number");
  }
  impl->min_origin_ns = static_cast<Nanoseconds>(std::llround(min_ns->get<double>()));
  HABITAT_ASSIGN_OR_RETURN(impl->trained_gpus, StringList(doc, path, "trained_gpus"));
  auto precisions = doc.find("trained_precisions");
  if (precisions == doc.end() || !precisions->is_object()) {
    return ManifestError(path, "\"trained_precisions\" must be an object");
  }
  for (const auto& [family_name, list] : precisions->items()) {
    auto family = ParseFamily(family_name);
    if (!family.ok()) {
      return ManifestError(path, absl::StrCat("trained_precisions: ", family.status().message()));
    }
    if (!list.is_array()) {
      return ManifestError(path,
                           absl::StrCat("trained_precisions.", family_name, " must be an array"));
    }
    auto& out = impl->trained_precisions[static_cast<size_t>(*family)];
    for (const json& p : list) {
      auto precision = ParsePrecision(p.is_string() ? p.get<std::string>() : p.dump());
      if (!precision.ok()) {
        return ManifestError(path, absl::StrCat("trained_precisions.", family_name, ": ",
                                                precision.status().message()));
      }
      out.push_back(*precision);
    }
  }
  auto sha = doc.find("model_sha256");
  if (sha == doc.end() || !sha->is_string() || sha->get<std::string>().size() != 64) {
    return ManifestError(path, "\"model_sha256\" must be 64 hex digits");
  }
  impl->model_sha256 = absl::AsciiStrToLower(sha->get<std::string>());
  return absl::OkStatus();
}

// Runs the module on `rows` rows; any LibTorch failure becomes a status.
absl::StatusOr<std::vector<double>> Forward(torch::jit::Module& module, const float* data,
                                            size_t rows) {
  try {
    c10::InferenceMode guard;
    // from_blob does not copy; the module only reads its input.
    at::Tensor input = torch::from_blob(
        const_cast<float*>(data), {static_cast<int64_t>(rows), static_cast<int64_t>(kFeatureCount)},
        torch::kFloat32);
    at::Tensor out = module.forward({input}).toTensor();
    if (out.dim() != 1 || out.size(0) != static_cast<int64_t>(rows)) {
      return absl::InternalError(absl::StrCat("kernel-varying model returned shape ",
                                              c10::str(out.sizes()), " for ", rows,
                                              " rows, expected [", rows, "]"));
    }
    out = out.to(torch::kFloat64).contiguous();
    const double* values = out.data_ptr<double>();
    std::vector<double> result(values, values + rows);
    for (size_t i = 0; i < rows; ++i) {
      if (!std::isfinite(result[i])) {
        return absl::InternalError(
            absl::StrCat("kernel-varying model returned ", result[i], " for row ", i));
      }
    }
    return result;
  } catch (const std::exception& e) {  // c10::Error derives from it
    return absl::InternalError(absl::StrCat("kernel-varying model failed: ", e.what()));
  }
}

}  // namespace

struct KernelVaryingModel::Impl {
  // forward() does not change the module; the JIT's graph executor locks
  // its own state, so concurrent calls are safe.
  mutable torch::jit::Module module;
  Manifest manifest;
};

KernelVaryingModel::KernelVaryingModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KernelVaryingModel::~KernelVaryingModel() = default;

absl::StatusOr<std::unique_ptr<KernelVaryingModel>> KernelVaryingModel::Load(
    const std::string& model_dir) {
  static std::once_flag threads_once;
  std::call_once(threads_once, [] { at::set_num_threads(1); });

  auto impl = std::make_unique<Impl>();
  const std::string manifest_path = model_dir + "/manifest.json";
  HABITAT_ASSIGN_OR_RETURN(std::string manifest_text, ReadBytes(manifest_path));
  HABITAT_RETURN_IF_ERROR(ParseManifest(manifest_path, manifest_text, &impl->manifest));

  const std::string model_path = model_dir + "/model.pt";
  HABITAT_ASSIGN_OR_RETURN(std::string model_bytes, ReadBytes(model_path));
  const std::string sha = Sha256Hex(model_bytes);
  if (sha != impl->manifest.model_sha256) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_path, ": sha256 ", sha, " differs from model_sha256 ", impl->manifest.model_sha256,
        " in ", manifest_path, " (model and manifest are from different training runs)"));
  }
  try {
    std::istringstream stream(model_bytes);
    impl->module = torch::jit::load(stream, torch::kCPU);
    impl->module.eval();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_path, ": not a loadable TorchScript model: ", e.what()));
  }
  // One pass now checks the input and output shapes, and leaves the JIT's
  // first-run optimisation behind us.
  const std::vector<float> probe(2 * kFeatureCount, 0.0f);
  for (size_t rows : {size_t{2}, size_t{1}}) {
    auto out = Forward(impl->module, probe.data(), rows);
    if (!out.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(model_path, ": does not map [N, ", kFeatureCount,
                       "] features to [N]: ", out.status().message()));
    }
  }
  return std::unique_ptr<KernelVaryingModel>(new KernelVaryingModel(std::move(impl)));
}

absl::StatusOr<std::vector<double>> KernelVaryingModel::PredictLog2Ratios(
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
  return Forward(impl_->module, rows_flat.data(), rows);
}

const std::vector<std::string>& KernelVaryingModel::trained_gpus() const {
  return impl_->manifest.trained_gpus;
}

const std::vector<Precision>& KernelVaryingModel::trained_precisions(Family family) const {
  return impl_->manifest.trained_precisions[static_cast<size_t>(family)];
}

Nanoseconds KernelVaryingModel::min_origin_ns() const { return impl_->manifest.min_origin_ns; }

const std::string& KernelVaryingModel::model_sha256() const { return impl_->manifest.model_sha256; }

}  // namespace mlp
}  // namespace habitat
