#include "core/kineto/kineto_header.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace habitat {
namespace kineto {
namespace {

using nlohmann::json;

absl::Status KeyError(absl::string_view key, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("Kineto trace: \"", key, "\" ", problem));
}

// Non-negative integer from a number or a numeric string; nullopt if absent.
absl::StatusOr<std::optional<uint64_t>> OptionalUnsigned(const json& object, const char* key,
                                                         absl::string_view path) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer() && it->get<int64_t>() >= 0) {
    return static_cast<uint64_t>(it->get<int64_t>());
  }
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (std::isfinite(d) && d >= 0 && d < 1.8e19 && d == std::floor(d)) {
      return static_cast<uint64_t>(d);
    }
  }
  if (it->is_string()) {
    uint64_t v;
    if (absl::SimpleAtoi(it->get<std::string>(), &v)) return v;
  }
  return KeyError(path, absl::StrCat("must be a non-negative integer, got ", it->dump()));
}

absl::StatusOr<uint32_t> Narrow(std::optional<uint64_t> v, absl::string_view path) {
  if (!v.has_value()) return 0u;
  if (*v > std::numeric_limits<uint32_t>::max()) {
    return KeyError(path, "is out of range");
  }
  return static_cast<uint32_t>(*v);
}

absl::Status FillOrigin(const json& document, int64_t device, habitat::v1::OriginDevice* origin) {
  auto props = document.find("deviceProperties");
  if (props == document.end()) return absl::OkStatus();
  if (!props->is_array()) {
    return KeyError("deviceProperties", "must be an array");
  }
  const json* chosen = nullptr;
  size_t chosen_index = 0;
  for (size_t i = 0; i < props->size(); ++i) {
    const json& p = (*props)[i];
    if (!p.is_object()) {
      return KeyError(absl::StrCat("deviceProperties[", i, "]"), "must be an object");
    }
    auto id = p.find("id");
    const bool match = id != p.end() && id->is_number_integer() && id->get<int64_t>() == device;
    if (chosen == nullptr || match) {
      chosen = &p;
      chosen_index = i;
    }
    if (match) break;
  }
  if (chosen == nullptr) return absl::OkStatus();
  const json& p = *chosen;
  const std::string at = absl::StrCat("deviceProperties[", chosen_index, "].");
  auto name = p.find("name");
  if (name != p.end()) {
    if (!name->is_string()) return KeyError(at + "name", "must be a string");
    origin->set_name(name->get<std::string>());
  }
  auto field = [&](const char* key) { return OptionalUnsigned(p, key, at + key); };
  HABITAT_ASSIGN_OR_RETURN(auto major, field("computeMajor"));
  HABITAT_ASSIGN_OR_RETURN(auto minor, field("computeMinor"));
  HABITAT_ASSIGN_OR_RETURN(auto sms, field("numSms"));
  HABITAT_ASSIGN_OR_RETURN(auto memory, field("totalGlobalMem"));
  HABITAT_ASSIGN_OR_RETURN(auto l2, field("l2CacheSize"));
  HABITAT_ASSIGN_OR_RETURN(uint32_t v, Narrow(major, at + "computeMajor"));
  origin->set_compute_capability_major(v);
  HABITAT_ASSIGN_OR_RETURN(v, Narrow(minor, at + "computeMinor"));
  origin->set_compute_capability_minor(v);
  HABITAT_ASSIGN_OR_RETURN(v, Narrow(sms, at + "numSms"));
  origin->set_sm_count(v);
  origin->set_memory_bytes(memory.value_or(0));
  origin->set_l2_cache_bytes(l2.value_or(0));
  return absl::OkStatus();
}

// A version key as written: numbers are decoded with `decode`, strings kept.
absl::StatusOr<std::string> VersionKey(const json& document, const char* key,
                                       std::string (*decode)(int64_t)) {
  auto it = document.find(key);
  if (it == document.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  HABITAT_ASSIGN_OR_RETURN(auto v, OptionalUnsigned(document, key, key));
  if (!v.has_value() || *v > static_cast<uint64_t>(INT64_MAX)) {
    return KeyError(key, "is out of range");
  }
  return decode(static_cast<int64_t>(*v));
}

std::string Verbatim(int64_t v) { return absl::StrCat(v); }

}  // namespace

std::string CudaVersionString(int64_t version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

std::string CudnnVersionString(int64_t version) {
  if (version >= 90000) {
    return absl::StrCat(version / 10000, ".", (version % 10000) / 100, ".", version % 100);
  }
  return absl::StrCat(version / 1000, ".", (version % 1000) / 100, ".", version % 100);
}

absl::Status FillHeader(const json& document, int64_t device, habitat::v1::Trace* trace) {
  HABITAT_RETURN_IF_ERROR(FillOrigin(document, device, trace->mutable_origin()));
  auto* frameworks = trace->mutable_frameworks();
  // torch.profiler writes no torch version itself; capture scripts add one
  // with prof.add_metadata(...) under one of these keys.
  for (const char* key : {"torch_version", "pytorch_version", "torch"}) {
    HABITAT_ASSIGN_OR_RETURN(std::string v, VersionKey(document, key, Verbatim));
    if (!v.empty()) {
      frameworks->set_torch(v);
      break;
    }
  }
  HABITAT_ASSIGN_OR_RETURN(std::string cuda,
                           VersionKey(document, "cuda_runtime_version", CudaVersionString));
  frameworks->set_cuda(cuda);
  HABITAT_ASSIGN_OR_RETURN(std::string cudnn,
                           VersionKey(document, "cudnn_version", CudnnVersionString));
  frameworks->set_cudnn(cudnn);
  // The CUDA driver API version is not the NVIDIA driver version that
  // OriginDevice.driver_version means; keep it as metadata only.
  HABITAT_ASSIGN_OR_RETURN(std::string driver,
                           VersionKey(document, "cuda_driver_version", CudaVersionString));
  if (!driver.empty()) {
    (*trace->mutable_metadata())["kineto.cuda_driver_version"] = driver;
  }
  HABITAT_ASSIGN_OR_RETURN(std::string schema, VersionKey(document, "schemaVersion", Verbatim));
  if (!schema.empty()) {
    (*trace->mutable_metadata())["kineto.schema_version"] = schema;
  }
  return absl::OkStatus();
}

}  // namespace kineto
}  // namespace habitat
