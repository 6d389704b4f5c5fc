// The GPU specification database (data/devices.textproto): loading,
// validation and lookups by id or by the name the CUDA driver reports.
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "habitat/v1/device.pb.h"

namespace habitat {

class DeviceDatabase {
 public:
  // Parses a text-format habitat.v1.DeviceDatabase and validates it. Parse
  // errors carry the file name, line and column; validation errors name the
  // GPU id and the field.
  static absl::StatusOr<DeviceDatabase> LoadFromFile(const std::string& path);

  // Validates an already parsed database. `origin` prefixes error messages
  // (a file name, or a description of where the proto came from).
  static absl::StatusOr<DeviceDatabase> FromProto(habitat::v1::DeviceDatabase proto,
                                                  absl::string_view origin = "device database");

  // nullptr if `id` is unknown.
  const habitat::v1::DeviceSpec* Find(absl::string_view id) const;
  // `id` as people type it: an id in any case ("h100-sxm"), or the name
  // nvidia-smi prints ("NVIDIA A100-SXM4-40GB", "Tesla T4"). NOT_FOUND,
  // with the closest id and the known ones, if none matches.
  absl::StatusOr<const habitat::v1::DeviceSpec*> Get(absl::string_view id) const;
  // Resolves cudaDeviceProp.name; ignores case and surrounding whitespace
  // because driver versions differ in both. nullptr if no GPU matches.
  const habitat::v1::DeviceSpec* FindByDriverName(absl::string_view name) const;

  // All GPUs, in file order (test_only ones included).
  const std::vector<habitat::v1::DeviceSpec>& devices() const { return devices_; }
  // The ids, in file order, comma-separated (for error messages).
  std::string KnownIds() const;

 private:
  DeviceDatabase() = default;

  std::vector<habitat::v1::DeviceSpec> devices_;
  // Indexes into devices_ (indexes, not pointers, so copies stay valid).
  absl::flat_hash_map<std::string, size_t> by_id_;
  absl::flat_hash_map<std::string, size_t> by_driver_name_;
};

// Validates one spec; `origin` prefixes the message. Exposed for tests and
// for callers that build specs by hand (e.g. from measured properties).
absl::Status ValidateDeviceSpec(const habitat::v1::DeviceSpec& spec, absl::string_view origin);

}  // namespace habitat
