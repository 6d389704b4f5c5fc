#include "agent/sidecar/spool_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace habitat::agent {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path, int error) {
  return absl::UnavailableError(absl::StrCat(what, " '", path, "': ", std::strerror(error)));
}

std::string Join(const std::string& dir, absl::string_view name) {
  return absl::StrCat(dir, "/", name);
}

bool Exists(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0;
}

}  // namespace

absl::StatusOr<std::vector<SpoolEntry>> ListSpool(const std::string& dir) {
  DIR* handle = ::opendir(dir.c_str());
  if (handle == nullptr) return ErrnoError("cannot list spool directory", dir, errno);
  std::vector<SpoolEntry> entries;
  while (const dirent* entry = ::readdir(handle)) {
    const absl::string_view name = entry->d_name;
    if (name.empty() || name[0] == '.' || !absl::EndsWith(name, kTraceSuffix) ||
        name.size() == sizeof(kTraceSuffix) - 1) {
      continue;
    }
    struct stat info;
    // lstat: a symlink is not a trace the writer handed over; it is skipped.
    if (::fstatat(::dirfd(handle), entry->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(info.st_mode)) {
      continue;
    }
    entries.push_back(
        SpoolEntry{std::string(name), absl::TimeFromTimespec(info.st_mtim), info.st_size});
  }
  ::closedir(handle);
  std::sort(entries.begin(), entries.end(), [](const SpoolEntry& a, const SpoolEntry& b) {
    return a.modified != b.modified ? a.modified < b.modified : a.name < b.name;
  });
  return entries;
}

absl::StatusOr<FileContents> ReadSpoolFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("'", path, "' is gone"));
    return ErrnoError("cannot open", path, errno);
  }
  FileContents contents;
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    return ErrnoError("cannot stat", path, error);
  }
  contents.device = info.st_dev;
  contents.inode = info.st_ino;
  std::string& data = contents.bytes;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      return ErrnoError("cannot read", path, error);
    }
    data.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return contents;
}

bool IsSameFile(const std::string& path, const FileContents& contents) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0 && info.st_dev == contents.device &&
         info.st_ino == contents.inode;
}

absl::Status RemoveDurably(const std::string& dir, const std::string& name) {
  const std::string path = Join(dir, name);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError("cannot delete", path, errno);
  }
  return SyncDirectory(dir);
}

absl::StatusOr<std::string> MoveToRejected(const std::string& dir, const std::string& name,
                                           absl::string_view reason) {
  const std::string rejected = Join(dir, kRejectedDir);
  if (::mkdir(rejected.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoError("cannot create", rejected, errno);
  }
  // Never overwrite an earlier rejected file of the same name: it may be
  // the only copy of something a person wants to look at.
  std::string target = name;
  for (int i = 1; Exists(Join(rejected, target)) || Exists(Join(rejected, target + ".reason"));
       ++i) {
    target = absl::StrCat(name, ".", i);
  }
  // The reason first: a crash in between leaves a stray .reason file, never
  // a rejected trace without one.
  HABITAT_RETURN_IF_ERROR(WriteFileAtomically(Join(rejected, target + ".reason"), reason));
  const std::string from = Join(dir, name);
  const std::string to = Join(rejected, target);
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoError(absl::StrCat("cannot move '", from, "' to"), to, errno);
  }
  HABITAT_RETURN_IF_ERROR(SyncDirectory(rejected));
  HABITAT_RETURN_IF_ERROR(SyncDirectory(dir));
  return to;
}

std::string FormatReceipt(const Receipt& receipt) {
  return absl::StrCat(
      "trace_id=", receipt.trace_id, "\n", "created=", receipt.created ? "true" : "false", "\n",
      "uploaded_at=",
      absl::FormatTime(absl::RFC3339_full, receipt.uploaded_at, absl::UTCTimeZone()), "\n",
      "server=", receipt.server, "\n");
}

absl::StatusOr<Receipt> ParseReceipt(absl::string_view text) {
  Receipt receipt;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (kv.first == "trace_id") {
      receipt.trace_id = std::string(kv.second);
    } else if (kv.first == "created") {
      receipt.created = kv.second == "true";
    } else if (kv.first == "uploaded_at") {
      std::string error;
      if (!absl::ParseTime(absl::RFC3339_full, kv.second, &receipt.uploaded_at, &error)) {
        return absl::InvalidArgumentError(
            absl::StrCat("receipt uploaded_at '", kv.second, "': ", error));
      }
    } else if (kv.first == "server") {
      receipt.server = std::string(kv.second);
    }
  }
  if (receipt.trace_id.empty()) {
    return absl::InvalidArgumentError("receipt has no trace_id line");
  }
  return receipt;
}

}  // namespace habitat::agent
