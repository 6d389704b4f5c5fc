#include "core/store/trace_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/trace/trace_id.h"

namespace habitat {
namespace {

constexpr char kTenantsSubdir[] = "/tenants";

// Tenant names become directory names and cache keys: the same rule as the
// server's token file (1-64 of [A-Za-z0-9._-], no leading '.'), or "".
bool IsStorableTenant(const std::string& tenant) {
  if (tenant.empty()) return true;
  if (tenant.size() > 64 || tenant[0] == '.') return false;
  for (const char c : tenant) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

absl::Status MakeDirectory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    const int error = errno;
    return ErrnoStatus(
        error, absl::StrCat("cannot create trace directory '", dir, "': ", std::strerror(error)));
  }
  return absl::OkStatus();
}

// Names of the entries in `dir` ending in `suffix`; empty if it is missing.
std::vector<std::string> Entries(const std::string& dir, absl::string_view suffix) {
  std::vector<std::string> names;
  if (DIR* handle = ::opendir(dir.c_str())) {
    while (dirent* entry = ::readdir(handle)) {
      if (absl::EndsWith(entry->d_name, suffix)) names.emplace_back(entry->d_name);
    }
    ::closedir(handle);
  }
  return names;
}

}  // namespace

absl::Status TraceNotFoundError(const std::string& id) {
  return absl::NotFoundError(
      absl::StrCat("trace_id '", id, "' is not stored on this server; upload it with UploadTrace"));
}

namespace {
std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}
}  // namespace

absl::Status CheckTenantQuota(const TenantQuota& quota, const TenantUsage& usage,
                              int64_t size_bytes) {
  const bool traces_fit = usage.traces < QuotaLimit(quota.max_traces);
  const bool bytes_fit = usage.bytes <= QuotaLimit(quota.max_bytes) - size_bytes;
  if (traces_fit && bytes_fit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the trace store's quota for this tenant is full: ", usage.traces, " traces (",
      Mib(usage.bytes), ") stored, a new one of ", Mib(size_bytes), " would pass the limit of ",
      traces_fit ? Mib(quota.max_bytes) : absl::StrCat(quota.max_traces, " traces"),
      "; traces leave the store when retention deletes them, or the operator can raise the "
      "quota (habitat-server --tenant_max_traces, --tenant_max_mib)"));
}

int64_t QuotaLimit(int64_t limit) {
  return limit > 0 ? limit : std::numeric_limits<int64_t>::max();
}

absl::Status WhyNotStored(const TenantQuota& quota, const TenantUsage& usage, int64_t size_bytes) {
  HABITAT_RETURN_IF_ERROR(CheckTenantQuota(quota, usage, size_bytes));
  // Room again: retention deleted traces between the two statements.
  return absl::AbortedError("the trace store changed while storing the trace; try again");
}

absl::Status CheckTenantName(const std::string& tenant) {
  if (IsStorableTenant(tenant)) return absl::OkStatus();
  return absl::InternalError("the tenant name is not usable in the trace store");
}

absl::StatusOr<StoredTrace> InMemoryTraceStore::Put(const std::string& tenant,
                                                    const v1::Trace& trace) {
  HABITAT_RETURN_IF_ERROR(CheckTenantName(tenant));
  HABITAT_ASSIGN_OR_RETURN(std::string id, ComputeTraceId(trace));
  const absl::Time now = clock_();
  const int64_t size = static_cast<int64_t>(trace.ByteSizeLong());
  const std::string key = TraceCache::Key(tenant, id);
  absl::MutexLock lock(&mutex_);
  if (traces_.contains(key)) return StoredTrace{id, false};
  TenantUsage& usage = usage_[tenant];
  HABITAT_RETURN_IF_ERROR(CheckTenantQuota(quota_, usage, size));
  traces_[key] = Entry{std::make_shared<const v1::Trace>(trace), now, tenant, size};
  ++usage.traces;
  usage.bytes += size;
  return StoredTrace{id, true};
}

absl::StatusOr<std::shared_ptr<const v1::Trace>> InMemoryTraceStore::Get(const std::string& tenant,
                                                                         const std::string& id) {
  HABITAT_RETURN_IF_ERROR(CheckTraceId(id));
  HABITAT_RETURN_IF_ERROR(CheckTenantName(tenant));
  absl::MutexLock lock(&mutex_);
  auto it = traces_.find(TraceCache::Key(tenant, id));
  if (it == traces_.end()) return TraceNotFoundError(id);
  return it->second.trace;
}

absl::StatusOr<size_t> InMemoryTraceStore::Count() {
  absl::MutexLock lock(&mutex_);
  return traces_.size();
}

absl::StatusOr<size_t> InMemoryTraceStore::DeleteOlderThan(absl::Time cutoff) {
  absl::MutexLock lock(&mutex_);
  size_t deleted = 0;
  for (auto it = traces_.begin(); it != traces_.end();) {
    if (it->second.created < cutoff) {
      TenantUsage& usage = usage_[it->second.tenant];
      --usage.traces;
      usage.bytes -= it->second.size_bytes;
      traces_.erase(it++);
      ++deleted;
    } else {
      ++it;
    }
  }
  return deleted;
}

absl::StatusOr<std::unique_ptr<DirectoryTraceStore>> DirectoryTraceStore::Open(
    const std::string& dir, TraceStoreOptions options) {
  if (dir.empty()) return absl::InvalidArgumentError("the trace directory path is empty");
  HABITAT_RETURN_IF_ERROR(MakeDirectory(dir));
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("'", dir, "' is not a directory"));
  }
  std::unique_ptr<DirectoryTraceStore> store(new DirectoryTraceStore(dir, std::move(options)));
  store->SweepOrphanedTemporaryFiles();
  return store;
}

namespace {
// The writer's PID in "<hex>.trace.<pid>.tmp" (WriteFileAtomically's
// name), or 0 if `name` is not such a file.
pid_t TemporaryFileWriter(absl::string_view name) {
  if (!absl::ConsumeSuffix(&name, ".tmp")) return 0;
  const size_t dot = name.rfind('.');
  if (dot == absl::string_view::npos || !absl::EndsWith(name.substr(0, dot), ".trace")) return 0;
  int pid = 0;
  if (!absl::SimpleAtoi(name.substr(dot + 1), &pid) || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}
}  // namespace

size_t DirectoryTraceStore::SweepOrphanedTemporaryFiles() const {
  size_t deleted = 0;
  for (const std::string& dir : AllDirs()) {
    for (const std::string& name : Entries(dir, ".tmp")) {
      const pid_t writer = TemporaryFileWriter(name);
      if (writer == 0) continue;
      const bool orphan = writer == ::getpid() || (::kill(writer, 0) != 0 && errno == ESRCH);
      if (orphan && ::unlink(absl::StrCat(dir, "/", name).c_str()) == 0) ++deleted;
    }
  }
  return deleted;
}

absl::StatusOr<std::string> DirectoryTraceStore::TenantDir(const std::string& tenant) const {
  HABITAT_RETURN_IF_ERROR(CheckTenantName(tenant));
  if (tenant.empty()) return dir_;
  return absl::StrCat(dir_, kTenantsSubdir, "/", tenant);
}

std::vector<std::string> DirectoryTraceStore::AllDirs() const {
  std::vector<std::string> dirs = {dir_};
  for (const std::string& name : Entries(dir_ + kTenantsSubdir, "")) {
    if (name != "." && name != ".." && IsStorableTenant(name)) {
      dirs.push_back(absl::StrCat(dir_, kTenantsSubdir, "/", name));
    }
  }
  return dirs;
}

namespace {
// "sha256:<hex>" -> "<dir>/<hex>.trace"; ids are checked well-formed first.
std::string PathFor(const std::string& dir, const std::string& id) {
  return absl::StrCat(dir, "/", id.substr(id.find(':') + 1), ".trace");
}
}  // namespace

absl::StatusOr<StoredTrace> DirectoryTraceStore::Put(const std::string& tenant,
                                                     const v1::Trace& trace) {
  HABITAT_ASSIGN_OR_RETURN(const std::string dir, TenantDir(tenant));
  HABITAT_ASSIGN_OR_RETURN(std::string id, ComputeTraceId(trace));
  absl::MutexLock lock(&mutex_);
  if (!tenant.empty()) {
    HABITAT_RETURN_IF_ERROR(MakeDirectory(dir_ + kTenantsSubdir));
    HABITAT_RETURN_IF_ERROR(MakeDirectory(dir));
  }
  const std::string path = PathFor(dir, id);
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) return StoredTrace{id, false};
  std::string bytes;
  if (!trace.SerializeToString(&bytes)) {
    return absl::InvalidArgumentError("trace cannot be serialised");
  }
  HABITAT_RETURN_IF_ERROR(
      CheckTenantQuota(quota_, UsageOf(dir), static_cast<int64_t>(bytes.size())));
  HABITAT_RETURN_IF_ERROR(WriteFileAtomically(path, bytes));
  // The mtime is the creation time retention reads; stamp it from the
  // clock so that it is the same time source as the other stores'.
  const timespec stamp = absl::ToTimespec(clock_());
  const timespec times[2] = {stamp, stamp};
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0) {
    const int error = errno;
    return ErrnoStatus(error,
                       absl::StrCat("cannot set the time of '", path, "': ", std::strerror(error)));
  }
  return StoredTrace{id, true};
}

TenantUsage DirectoryTraceStore::UsageOf(const std::string& dir) const {
  TenantUsage usage;
  if (quota_.max_traces <= 0 && quota_.max_bytes <= 0) return usage;  // no scan needed
  for (const std::string& name : Entries(dir, ".trace")) {
    struct stat info;
    if (::stat(absl::StrCat(dir, "/", name).c_str(), &info) != 0) continue;
    ++usage.traces;
    usage.bytes += info.st_size;
  }
  return usage;
}

absl::StatusOr<std::shared_ptr<const v1::Trace>> DirectoryTraceStore::Get(const std::string& tenant,
                                                                          const std::string& id) {
  HABITAT_RETURN_IF_ERROR(CheckTraceId(id));
  HABITAT_ASSIGN_OR_RETURN(const std::string dir, TenantDir(tenant));
  const std::string path = PathFor(dir, id);
  const std::string key = TraceCache::Key(tenant, id);
  if (auto cached = cache_.Find(key)) {
    // Retention may have deleted the file since it was cached.
    struct stat info;
    if (::stat(path.c_str(), &info) == 0) return cached;
    return TraceNotFoundError(id);
  }
  auto bytes = ReadFile(path);
  if (!bytes.ok()) {
    if (bytes.status().code() == absl::StatusCode::kNotFound) return TraceNotFoundError(id);
    return bytes.status();
  }
  auto trace = std::make_shared<v1::Trace>();
  if (!trace->ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat("stored trace ", id, " ('", path, "') is corrupt"));
  }
  cache_.Insert(key, trace);
  return std::shared_ptr<const v1::Trace>(std::move(trace));
}

absl::StatusOr<size_t> DirectoryTraceStore::Count() {
  size_t count = 0;
  for (const std::string& dir : AllDirs()) count += Entries(dir, ".trace").size();
  return count;
}

absl::StatusOr<size_t> DirectoryTraceStore::DeleteOlderThan(absl::Time cutoff) {
  absl::MutexLock lock(&mutex_);
  size_t deleted = 0;
  for (const std::string& dir : AllDirs()) {
    for (const std::string& name : Entries(dir, ".trace")) {
      const std::string path = absl::StrCat(dir, "/", name);
      struct stat info;
      if (::stat(path.c_str(), &info) != 0) continue;  // deleted meanwhile
      if (absl::TimeFromTimespec(info.st_mtim) >= cutoff) continue;
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        return absl::UnavailableError(
            absl::StrCat("retention: cannot delete '", path, "': ", std::strerror(errno)));
      }
      ++deleted;
    }
  }
  return deleted;
}

}  // namespace habitat
