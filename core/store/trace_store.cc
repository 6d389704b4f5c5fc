#include "core/store/trace_store.h"

#include <sys/stat.h>
#include <dirent.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/trace/trace_id.h"

namespace habitat {

absl::StatusOr<StoredTrace> InMemoryTraceStore::Put(const v1::Trace& trace) {
  HABITAT_ASSIGN_OR_RETURN(std::string id, ComputeTraceId(trace));
  absl::MutexLock lock(&mutex_);
  auto [it, inserted] = traces_.try_emplace(id, nullptr);
  if (inserted) it->second = std::make_shared<const v1::Trace>(trace);
  return StoredTrace{id, inserted};
}

absl::StatusOr<std::shared_ptr<const v1::Trace>> InMemoryTraceStore::Get(
    const std::string& id) {
  absl::MutexLock lock(&mutex_);
  auto it = traces_.find(id);
  if (it == traces_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "trace_id '", id, "' is not stored on this server; upload it with UploadTrace"));
  }
  return it->second;
}

size_t InMemoryTraceStore::size() {
  absl::MutexLock lock(&mutex_);
  return traces_.size();
}

absl::StatusOr<std::unique_ptr<DirectoryTraceStore>> DirectoryTraceStore::Open(
    const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("cannot create trace directory '", dir, "': ", std::strerror(errno)));
  }
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("'", dir, "' is not a directory"));
  }
  return std::unique_ptr<DirectoryTraceStore>(new DirectoryTraceStore(dir));
}

std::string DirectoryTraceStore::PathFor(const std::string& id) const {
  // "sha256:<hex>" -> "<hex>.trace"; ids are checked well-formed first.
  return absl::StrCat(dir_, "/", id.substr(id.find(':') + 1), ".trace");
}

absl::StatusOr<StoredTrace> DirectoryTraceStore::Put(const v1::Trace& trace) {
  HABITAT_ASSIGN_OR_RETURN(std::string id, ComputeTraceId(trace));
  absl::MutexLock lock(&mutex_);
  const std::string path = PathFor(id);
  struct stat info;
  const bool existed = ::stat(path.c_str(), &info) == 0;
  if (!existed) {
    std::string bytes;
    if (!trace.SerializeToString(&bytes)) {
      return absl::InvalidArgumentError("trace cannot be serialised");
    }
    HABITAT_RETURN_IF_ERROR(WriteFileAtomically(path, bytes));
  }
  return StoredTrace{id, !existed};
}

absl::StatusOr<std::shared_ptr<const v1::Trace>> DirectoryTraceStore::Get(
    const std::string& id) {
  if (!IsWellFormedTraceId(id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace_id '", id, "' is not of the form sha256:<64 hex digits>"));
  }
  auto cached = cache_.Get(id);
  if (cached.ok()) return cached;
  auto bytes = ReadFile(PathFor(id));
  if (!bytes.ok()) {
    if (bytes.status().code() == absl::StatusCode::kNotFound) return cached.status();
    return bytes.status();
  }
  v1::Trace trace;
  if (!trace.ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat("stored trace ", id, " is corrupt"));
  }
  HABITAT_RETURN_IF_ERROR(cache_.Put(trace).status());
  return cache_.Get(id);
}

size_t DirectoryTraceStore::size() {
  absl::MutexLock lock(&mutex_);
  size_t count = 0;
  if (DIR* dir = ::opendir(dir_.c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      if (absl::EndsWith(entry->d_name, ".trace")) ++count;
    }
    ::closedir(dir);
  }
  return count;
}

}  // namespace habitat
