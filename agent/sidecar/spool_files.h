// The spool directory on disk: which files are traces, durable writes,
// receipts and the rejected/ folder. No gRPC here; spool.h drives it.
//
// Protocol (writers are the tracker, or anything that follows it):
//  - a writer writes NAME.trace.tmp and renames it to NAME.trace, so a
//    NAME.trace file is always complete; only *.trace files are picked up;
//  - after the server acknowledged NAME.trace the sidecar writes the receipt
//    NAME.trace.done (trace id and time, fsynced), then deletes NAME.trace
//    and fsyncs the directory;
//  - a file that can never be uploaded goes to rejected/NAME.trace with
//    rejected/NAME.trace.reason beside it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace habitat::agent {

inline constexpr char kTraceSuffix[] = ".trace";
inline constexpr char kReceiptSuffix[] = ".done";
inline constexpr char kRejectedDir[] = "rejected";

struct SpoolEntry {
  // File name inside the spool ("resnet50.trace").
  std::string name;
  absl::Time modified;
  off_t size = 0;
};

// Regular files named *.trace (not hidden), oldest first (ties by name), so
// traces are shipped in the order they were written.
absl::StatusOr<std::vector<SpoolEntry>> ListSpool(const std::string& dir);

// Files are written with WriteFileAtomically and directories synced with
// SyncDirectory (common/file_io.h): once a write returns OK the file
// survives a crash or power loss.

// A file's bytes and which file they came from.
struct FileContents {
  std::string bytes;
  dev_t device = 0;
  ino_t inode = 0;
};

// Reads a regular file (symlinks are refused). NOT_FOUND only when the file
// does not exist (it was taken away between listing and reading); other
// failures are UNAVAILABLE, naming the file and the system error.
absl::StatusOr<FileContents> ReadSpoolFile(const std::string& path);

// True when `path` is still the file that was read: a writer may have
// renamed a new trace of the same name over it meanwhile.
bool IsSameFile(const std::string& path, const FileContents& contents);

// Removes a file and fsyncs the directory. A file that is already gone is
// not an error.
absl::Status RemoveDurably(const std::string& dir, const std::string& name);

// Moves spool/NAME to spool/rejected/NAME (NAME.1, NAME.2 ... if taken) with
// a NAME.reason file holding `reason`; both durable. Returns the new path.
absl::StatusOr<std::string> MoveToRejected(const std::string& dir, const std::string& name,
                                           absl::string_view reason);

struct Receipt {
  std::string trace_id;
  bool created = false;
  absl::Time uploaded_at;
  std::string server;
};

std::string FormatReceipt(const Receipt& receipt);
// INVALID_ARGUMENT when `text` lacks a trace_id line.
absl::StatusOr<Receipt> ParseReceipt(absl::string_view text);

}  // namespace habitat::agent
