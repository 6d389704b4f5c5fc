// SHA-256 as lowercase hex: content-addressed trace ids and the model files'
// checksums use the same digest.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace habitat {

// 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view bytes);

}  // namespace habitat
