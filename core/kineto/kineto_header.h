// Trace-level facts from the top-level keys of a Kineto trace: the GPU
// ("deviceProperties") and the software versions.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "habitat/v1/trace.pb.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace kineto {

// Fills origin (from the deviceProperties entry whose "id" is `device`,
// else the first entry), frameworks (torch/cuda/cudnn when the trace says),
// and version metadata. INVALID_ARGUMENT when a present key has the wrong
// type.
absl::Status FillHeader(const nlohmann::json& document, int64_t device, habitat::v1::Trace* trace);

// 12010 -> "12.1" (CUDA runtime/driver version encoding).
std::string CudaVersionString(int64_t version);
// 8902 -> "8.9.2", 90100 -> "9.1.0" (cuDNN changed encoding at 9).
std::string CudnnVersionString(int64_t version);

}  // namespace kineto
}  // namespace habitat
