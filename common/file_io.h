// Whole-file reads and crash-safe writes, with errors as absl::Status.
#pragma once

#include <cstddef>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace habitat {

// `message` as a status whose code follows `error` (an errno value): out of
// space (ENOSPC, EDQUOT, EFBIG) is RESOURCE_EXHAUSTED, as the SQLite and
// PostgreSQL stores say it, not UNAVAILABLE, which clients retry and the
// sidecar reads as "server down"; anything else is UNAVAILABLE.
absl::Status ErrnoStatus(int error, absl::string_view message);

// No bound on inflated sizes (for trusted files).
inline constexpr size_t kNoInflateLimit = std::numeric_limits<size_t>::max();

// Reads a file; transparently inflates gzip content (magic 1f 8b), at most
// `max_inflated_bytes` of it (see Gunzip).
absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     size_t max_inflated_bytes = kNoInflateLimit);

// Writes to `path` through a temporary file (PATH.<pid>.tmp: it ends in
// ".tmp", never in a suffix a reader of the directory looks for), fsync,
// rename and a sync of the directory: a reader never sees a partial file,
// and once this returns OK the file survives a crash.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// Flushes a directory's entries (a rename or unlink in it) to disk. File
// systems that cannot sync a directory at all (EINVAL: FUSE, some network
// mounts) count as done, as PostgreSQL does: failing there would make every
// write on them fail.
absl::Status SyncDirectory(const std::string& dir);

// Inflates gzip or zlib data: exactly one member (bytes after its end, such
// as a second member or appended junk, are INVALID_ARGUMENT). Past `max_inflated_bytes` it stops
// with RESOURCE_EXHAUSTED ("inflates to more than N bytes"), having held no more than that (plus
// one 64 KiB chunk): a small file of zeros can inflate a thousandfold, so data from users must be
// inflated with a bound.
absl::StatusOr<std::string> Gunzip(absl::string_view compressed,
                                   size_t max_inflated_bytes = kNoInflateLimit);
// Compresses as gzip (level 6).
absl::StatusOr<std::string> Gzip(absl::string_view data);

}  // namespace habitat
