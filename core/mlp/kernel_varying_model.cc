#include "core/mlp/kernel_varying_model.h"

#include <algorithm>
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
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/sha256.h"
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
  // GPU ids whose measurements trained each (family, precision).
  std::array<std::array<std::vector<std::string>, 2>, kFamilyCount> coverage;
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
  auto coverage = doc.find("coverage");
  if (coverage == doc.end() || !coverage->is_object()) {
    return ManifestError(path, "no \"coverage\" object (written by models/export.py); re-export");
  }
  for (const auto& [family_name, by_precision] : coverage->items()) {
    auto family = ParseFamily(family_name);
    if (!family.ok()) {
      return ManifestError(path, absl::StrCat("coverage: ", family.status().message()));
    }
    if (!by_precision.is_object()) {
      return ManifestError(path, absl::StrCat("coverage.", family_name, " is not an object"));
    }
    for (const auto& [precision_name, gpus] : by_precision.items()) {
      auto precision = ParsePrecision(precision_name);
      if (!precision.ok()) {
        return ManifestError(path, absl::StrCat("coverage.", family_name, ": ",
                                                precision.status().message()));
      }
      auto& ids = impl->coverage[static_cast<size_t>(*family)][static_cast<size_t>(*precision)];
      for (const json& gpu : gpus) {
        if (!gpu.is_string()) {
          return ManifestError(path, absl::StrCat("coverage.", family_name, ".",
                                                  precision_name, " holds a non-string"));
        }
        ids.push_back(gpu.get<std::string>());
      }
    }
  }
  auto sha = doc.find("model_sha256");
  if (sha == doc.end() || !sha->is_string() || sha->get<std::string>().size() != 64) {
    return ManifestError(path, "\"model_sha256\" must be 64 hex digits");
  }
  impl->model_sha256 = absl::AsciiStrToLower(sha->get<std::string>());
  return absl::OkStatus();
}

// The network of models/train.py's Predictor, evaluated without LibTorch
// (LibTorch 1.13 in the server process stops prometheus-cpp's HTTP server
// from starting): normalise the context features, dense layers with ReLU
// between them, then either the single output ("free") or the weighted sum
// of the target-minus-origin spec differences ("structured"). float32 like
// the trained model; the parity test holds it to the exported model's
// outputs.
// acc[b][r] += w[c * rows + r] * h[b][c] over all c, for a block of `batch`
// rows at once: one dense layer, transposed weights. A block reuses each
// weight column from L1 for every row (the weights, ~0.8 MB, do not fit in
// L2), and the inner loop runs over independent outputs, so GCC vectorises it
// without reordering any sum: every row's result is the same as alone.
// Cloned for AVX2 (picked at load time by the CPU it runs on). No FMA clone:
// fused and unfused sums differ in the last bit, and predictions must not
// depend on the CPU.
__attribute__((target_clones("avx2", "default"))) void DenseLayer(
    const float* weight_t, const float* h, size_t batch, size_t rows, size_t cols,
    float* acc) {
  // Four inputs per pass over the outputs: each output is loaded and stored
  // a quarter as often, and its sum still runs over c in order.
  size_t c = 0;
  for (; c + 4 <= cols; c += 4) {
    const float* w0 = weight_t + c * rows;
    const float* w1 = w0 + rows;
    const float* w2 = w1 + rows;
    const float* w3 = w2 + rows;
    for (size_t b = 0; b < batch; ++b) {
      const float* in = h + b * cols + c;
      const float v0 = in[0], v1 = in[1], v2 = in[2], v3 = in[3];
      float* __restrict out = acc + b * rows;
      for (size_t r = 0; r < rows; ++r) {
        out[r] = (((out[r] + w0[r] * v0) + w1[r] * v1) + w2[r] * v2) + w3[r] * v3;
      }
    }
  }
  for (; c < cols; ++c) {
    const float* w = weight_t + c * rows;
    for (size_t b = 0; b < batch; ++b) {
      const float v = h[b * cols + c];
      float* __restrict out = acc + b * rows;
      for (size_t r = 0; r < rows; ++r) out[r] += w[r] * v;
    }
  }
}

struct Network {
  bool structured = true;
  std::vector<size_t> context, delta_origin, delta_target;
  std::vector<double> mean, std;
  struct Layer {
    size_t rows = 0, cols = 0;
    std::vector<float> weight_t;  // cols x rows (transposed)
    std::vector<float> bias;
  };
  std::vector<Layer> layers;

  // Rows evaluated together: their activations (16 x 256 floats) stay in L1.
  static constexpr size_t kBlock = 16;

  // Evaluates `count` rows of kFeatureCount features into `out`.
  void Forward(const float* x, size_t count, double* out) const {
    std::vector<float> h, next;
    for (size_t first = 0; first < count; first += kBlock) {
      const size_t batch = std::min(kBlock, count - first);
      h.resize(batch * context.size());
      for (size_t b = 0; b < batch; ++b) {
        const float* row = x + (first + b) * kFeatureCount;
        for (size_t j = 0; j < context.size(); ++j) {
          h[b * context.size() + j] = static_cast<float>((row[context[j]] - mean[j]) / std[j]);
        }
      }
      for (size_t l = 0; l < layers.size(); ++l) {
        const Layer& layer = layers[l];
        next.resize(batch * layer.rows);
        for (size_t b = 0; b < batch; ++b) {
          std::copy(layer.bias.begin(), layer.bias.end(), next.begin() + b * layer.rows);
        }
        DenseLayer(layer.weight_t.data(), h.data(), batch, layer.rows, layer.cols, next.data());
        if (l + 1 < layers.size()) {
          for (float& value : next) value = value < 0.0f ? 0.0f : value;
        }
        h.swap(next);
      }
      const size_t width = layers.back().rows;
      for (size_t b = 0; b < batch; ++b) {
        const float* row = x + (first + b) * kFeatureCount;
        const float* last = h.data() + b * width;
        if (!structured) {
          out[first + b] = last[0];
          continue;
        }
        double sum = 0.0;
        for (size_t k = 0; k < width; ++k) {
          sum += static_cast<double>(last[k]) *
                 (static_cast<double>(row[delta_target[k]]) - row[delta_origin[k]]);
        }
        out[first + b] = sum;
      }
    }
  }
};

absl::StatusOr<std::vector<double>> Numbers(const json& doc, const char* key,
                                            const std::string& path) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": '", key, "' is not a list"));
  }
  std::vector<double> out;
  for (const auto& v : *it) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": '", key, "' holds a non-number"));
    }
    out.push_back(v.get<double>());
  }
  return out;
}

absl::StatusOr<std::vector<size_t>> Indices(const json& doc, const char* key,
                                            const std::string& path) {
  HABITAT_ASSIGN_OR_RETURN(std::vector<double> values, Numbers(doc, key, path));
  std::vector<size_t> out;
  for (double v : values) {
    if (v < 0 || v >= static_cast<double>(kFeatureCount) || v != std::floor(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": '", key, "' holds ", v, ", not a feature index"));
    }
    out.push_back(static_cast<size_t>(v));
  }
  return out;
}

absl::StatusOr<Network> ParseNetwork(const std::string& path, const std::string& text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON"));
  Network net;
  const auto arch = doc.find("arch");
  if (arch == doc.end() || !arch->is_string() ||
      (*arch != "structured" && *arch != "free")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": 'arch' must be \"structured\" or \"free\""));
  }
  net.structured = *arch == "structured";
  HABITAT_ASSIGN_OR_RETURN(net.context, Indices(doc, "context", path));
  HABITAT_ASSIGN_OR_RETURN(net.delta_origin, Indices(doc, "delta_origin", path));
  HABITAT_ASSIGN_OR_RETURN(net.delta_target, Indices(doc, "delta_target", path));
  HABITAT_ASSIGN_OR_RETURN(net.mean, Numbers(doc, "mean", path));
  HABITAT_ASSIGN_OR_RETURN(net.std, Numbers(doc, "std", path));
  if (net.mean.size() != net.context.size() || net.std.size() != net.context.size() ||
      net.delta_origin.size() != net.delta_target.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": context, mean, std (and the two delta lists) differ in length"));
  }
  for (double s : net.std) {
    if (s == 0.0) return absl::InvalidArgumentError(absl::StrCat(path, ": a std of 0"));
  }
  const auto layers = doc.find("layers");
  if (layers == doc.end() || !layers->is_array() || layers->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no 'layers'"));
  }
  size_t width = net.context.size();
  for (size_t l = 0; l < layers->size(); ++l) {
    const json& layer = (*layers)[l];
    const std::string where = absl::StrCat(path, ": layers[", l, "]");
    const auto weight = layer.is_object() ? layer.find("weight") : layer.end();
    if (weight == layer.end() || !weight->is_array() || weight->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has no weight rows"));
    }
    Network::Layer parsed;
    parsed.rows = weight->size();
    parsed.cols = width;
    parsed.weight_t.assign(parsed.rows * parsed.cols, 0.0f);
    for (size_t r = 0; r < parsed.rows; ++r) {
      const json& row = (*weight)[r];
      if (!row.is_array() || row.size() != width) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " weight rows must have ", width, " columns"));
      }
      for (size_t c = 0; c < width; ++c) {
        if (!row[c].is_number()) {
          return absl::InvalidArgumentError(absl::StrCat(where, " non-number"));
        }
        parsed.weight_t[c * parsed.rows + r] = row[c].get<float>();
      }
    }
    HABITAT_ASSIGN_OR_RETURN(std::vector<double> bias, Numbers(layer, "bias", where));
    parsed.bias.assign(bias.begin(), bias.end());
    if (parsed.bias.size() != parsed.rows) {
      return absl::InvalidArgumentError(absl::StrCat(where, " bias length != weight rows"));
    }
    width = parsed.rows;
    net.layers.push_back(std::move(parsed));
  }
  const size_t outputs = net.structured ? net.delta_origin.size() : 1;
  if (width != outputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": does not map [N, ", kFeatureCount, "] features to [N]: the last layer has ",
        width, " outputs, the '", arch->get<std::string>(), "' model needs ", outputs));
  }
  return net;
}

}  // namespace

struct KernelVaryingModel::Impl {
  // Read-only after Load: concurrent calls are safe.
  Network network;
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

  const std::string model_path = model_dir + "/model.json.gz";
  HABITAT_ASSIGN_OR_RETURN(std::string model_bytes, ReadBytes(model_path));
  const std::string sha = Sha256Hex(model_bytes);
  if (sha != impl->manifest.model_sha256) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_path, ": sha256 ", sha, " differs from model_sha256 ", impl->manifest.model_sha256,
        " in ", manifest_path, " (model and manifest are from different training runs)"));
  }
  absl::StatusOr<std::string> text = Gunzip(model_bytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_path, ": not a gzip file: ", text.status().message()));
  }
  HABITAT_ASSIGN_OR_RETURN(impl->network, ParseNetwork(model_path, *text));
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
  std::vector<double> out(rows);
  impl_->network.Forward(rows_flat.data(), rows, out.data());
  for (size_t r = 0; r < rows; ++r) {
    if (!std::isfinite(out[r])) {
      return absl::InternalError(
          absl::StrCat("kernel-varying model returned ", out[r], " for row ", r));
    }
  }
  return out;
}

const std::vector<std::string>& KernelVaryingModel::trained_gpus() const {
  return impl_->manifest.trained_gpus;
}

const std::vector<Precision>& KernelVaryingModel::trained_precisions(Family family) const {
  return impl_->manifest.trained_precisions[static_cast<size_t>(family)];
}

bool KernelVaryingModel::TrainedOn(Family family, Precision precision,
                                   absl::string_view gpu_id) const {
  const auto& ids =
      impl_->manifest.coverage[static_cast<size_t>(family)][static_cast<size_t>(precision)];
  return std::find(ids.begin(), ids.end(), gpu_id) != ids.end();
}

Nanoseconds KernelVaryingModel::min_origin_ns() const { return impl_->manifest.min_origin_ns; }

const std::string& KernelVaryingModel::model_sha256() const { return impl_->manifest.model_sha256; }

}  // namespace mlp
}  // namespace habitat
