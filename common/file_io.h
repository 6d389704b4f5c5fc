// Whole-file reads and crash-safe writes, with errors as absl::Status.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace habitat {

// Reads a file; transparently inflates gzip content (magic 1f 8b).
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes to `path` through a temporary file, fsync and rename, so a reader
// never sees a partial file.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents);

// Inflates gzip or zlib data.
absl::StatusOr<std::string> Gunzip(absl::string_view compressed);
// Compresses as gzip (level 6).
absl::StatusOr<std::string> Gzip(absl::string_view data);

}  // namespace habitat
