// Reads a text-format protobuf file with errors that point at the line.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace habitat {

// Reads `path` and parses it into `message`. A syntax error or unknown
// field gives INVALID_ARGUMENT "<path>: not a text-format <type>: line L,
// column C: <what>" (1-based line and column).
absl::Status ReadTextProtoFile(const std::string& path, google::protobuf::Message* message);

}  // namespace habitat
