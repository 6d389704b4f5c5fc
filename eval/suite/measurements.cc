#include "eval/suite/measurements.h"

#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace eval {
namespace {

using nlohmann::json;

absl::Status FieldError(const std::string& path, size_t index, const char* field,
                        const char* what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": cases[", index, "].", field, " ", what));
}

// The field as T, or an error naming it (json's own exceptions would name
// neither the file nor the case).
template <typename T>
absl::StatusOr<T> Get(const json& item, const std::string& path, size_t index, const char* field) {
  auto it = item.find(field);
  if (it == item.end()) return FieldError(path, index, field, "is missing");
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return FieldError(path, index, field, "is not a string");
  } else if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return FieldError(path, index, field, "is not an integer");
  } else {
    if (!it->is_number()) return FieldError(path, index, field, "is not a number");
  }
  return it->get<T>();
}

}  // namespace

absl::StatusOr<std::map<std::string, MeasuredCase>> LoadMeasurements(const std::string& path) {
  HABITAT_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON"));
  if (!doc.is_object() || !doc.contains("cases") || !doc["cases"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no \"cases\" array"));
  }
  std::map<std::string, MeasuredCase> cases;
  const json& items = doc["cases"];
  for (size_t i = 0; i < items.size(); ++i) {
    const json& item = items[i];
    if (!item.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": cases[", i, "] is not an object"));
    }
    MeasuredCase c;
    HABITAT_ASSIGN_OR_RETURN(c.name, Get<std::string>(item, path, i, "case"));
    HABITAT_ASSIGN_OR_RETURN(c.model, Get<std::string>(item, path, i, "model"));
    HABITAT_ASSIGN_OR_RETURN(int64_t batch, Get<int64_t>(item, path, i, "batch_size"));
    HABITAT_ASSIGN_OR_RETURN(c.precision, Get<std::string>(item, path, i, "precision"));
    HABITAT_ASSIGN_OR_RETURN(c.wall_ns, Get<int64_t>(item, path, i, "wall_ns_median"));
    HABITAT_ASSIGN_OR_RETURN(c.busy_ns, Get<int64_t>(item, path, i, "gpu_busy_ns_median"));
    HABITAT_ASSIGN_OR_RETURN(c.host_share, Get<double>(item, path, i, "host_share"));
    if (c.name.empty()) return FieldError(path, i, "case", "is empty");
    if (batch <= 0 || batch > (int64_t{1} << 31)) {
      return FieldError(path, i, "batch_size", "is out of range");
    }
    c.batch = static_cast<uint32_t>(batch);
    if (c.wall_ns <= 0) return FieldError(path, i, "wall_ns_median", "is not positive");
    if (c.busy_ns <= 0) return FieldError(path, i, "gpu_busy_ns_median", "is not positive");
    if (!(c.host_share >= 0 && c.host_share < 1)) {
      return FieldError(path, i, "host_share", "is outside [0, 1)");
    }
    if (!cases.emplace(c.name, c).second) {
      return FieldError(path, i, "case", absl::StrCat("repeats \"", c.name, "\"").c_str());
    }
  }
  return cases;
}

absl::StatusOr<habitat::v1::Precision> TracePrecision(const std::string& precision) {
  if (precision == "fp32") return habitat::v1::PRECISION_FP32;
  if (precision == "bf16") return habitat::v1::PRECISION_AMP_BF16;
  return absl::InvalidArgumentError(
      absl::StrCat("precision \"", precision, "\" is neither fp32 nor bf16"));
}

}  // namespace eval
}  // namespace habitat
