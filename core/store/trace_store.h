// Where uploaded traces live. Each tenant has its own namespace; ids are
// content addresses (ComputeTraceId), so storing the same trace twice for a
// tenant keeps one copy.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/store/trace_cache.h"
#include "core/trace/trace_id.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

struct StoredTrace {
  std::string id;
  // False when the tenant had already stored the trace.
  bool created = false;
};

// Stamps stored traces and is what retention compares against; tests inject
// a fake one.
using Clock = std::function<absl::Time()>;

// How much one tenant may keep, so that one tenant cannot fill a shared
// store for all. Bytes are serialised trace sizes. Zero: no limit. A trace
// the tenant has already stored needs no room.
struct TenantQuota {
  int64_t max_traces = 10000;
  int64_t max_bytes = int64_t{8} << 30;
};

struct TenantUsage {
  int64_t traces = 0;
  int64_t bytes = 0;
};

// RESOURCE_EXHAUSTED, saying what the tenant has stored and the limit, when
// a new trace of `size_bytes` would take `usage` past `quota`.
absl::Status CheckTenantQuota(const TenantQuota& quota, const TenantUsage& usage,
                              int64_t size_bytes);

// A quota limit as it is compared (in C++ and by the SQL stores): no limit
// is INT64_MAX.
int64_t QuotaLimit(int64_t limit);

// For a store whose conditional INSERT stored nothing although the tenant
// does not have the trace: the quota's RESOURCE_EXHAUSTED for `usage` read
// after it, or ABORTED (try again) when there is room by then.
absl::Status WhyNotStored(const TenantQuota& quota, const TenantUsage& usage, int64_t size_bytes);

struct TraceStoreOptions {
  Clock clock = [] { return absl::Now(); };
  TenantQuota quota;
  // Parsed traces kept in memory, by serialised size, so that Predict by id
  // does not read and parse the trace again on every call.
  size_t cache_bytes = size_t{256} << 20;
  // Shared stores (SQL) answer Count() from a count re-read at most this
  // often, plus this process's own changes since (a COUNT(*) per upload
  // would scan the table). Zero: always re-read.
  absl::Duration count_refresh = absl::Seconds(5);
};

// The NOT_FOUND every store gives for an id the tenant has not stored,
// whether or not another tenant has: the answer leaks nothing.
absl::Status TraceNotFoundError(const std::string& id);
// INTERNAL unless `tenant` is "" or 1-64 of [A-Za-z0-9._-] not starting
// with '.' (the server's token-file rule: names become directory names and
// cache keys). Tenants come from the server's configuration, never from a
// request, so a bad one is the server's fault.
absl::Status CheckTenantName(const std::string& tenant);

class TraceStore {
 public:
  virtual ~TraceStore() = default;
  // Stores a validated trace for `tenant` ("" is the anonymous tenant)
  // unless that tenant has it already. Returns only once the trace is
  // durable (for stores that persist). Safe to call from many threads.
  virtual absl::StatusOr<StoredTrace> Put(const std::string& tenant,
                                          const habitat::v1::Trace& trace) = 0;
  // CheckTraceId's error for malformed ids, TraceNotFoundError for ids the
  // tenant has not stored.
  virtual absl::StatusOr<std::shared_ptr<const habitat::v1::Trace>> Get(const std::string& tenant,
                                                                        const std::string& id) = 0;
  // Traces stored, over all tenants.
  virtual absl::StatusOr<size_t> Count() = 0;
  // Deletes every trace (of every tenant) stored before `cutoff`; returns
  // how many.
  virtual absl::StatusOr<size_t> DeleteOlderThan(absl::Time cutoff) = 0;
  // What and where, for logs: "sqlite:/var/lib/habitat/traces.db". Never
  // holds a password.
  virtual std::string Describe() const = 0;
  // True when Get of a trace it has parsed answers without a network round
  // trip (memory, directory, SQLite file): the server then answers a cached
  // Predict on gRPC's own thread, which must not wait on a database server.
  virtual bool AnswersLocally() const { return true; }
};

// Keeps traces in memory: for the embedded CLI and tests.
class InMemoryTraceStore : public TraceStore {
 public:
  explicit InMemoryTraceStore(TraceStoreOptions options = {})
      : clock_(std::move(options.clock)), quota_(options.quota) {}
  absl::StatusOr<StoredTrace> Put(const std::string& tenant,
                                  const habitat::v1::Trace& trace) override;
  absl::StatusOr<std::shared_ptr<const habitat::v1::Trace>> Get(const std::string& tenant,
                                                                const std::string& id) override;
  absl::StatusOr<size_t> Count() override;
  absl::StatusOr<size_t> DeleteOlderThan(absl::Time cutoff) override;
  std::string Describe() const override { return "memory"; }

 private:
  struct Entry {
    std::shared_ptr<const habitat::v1::Trace> trace;
    absl::Time created;
    std::string tenant;
    int64_t size_bytes = 0;
  };
  const Clock clock_;
  const TenantQuota quota_;
  absl::Mutex mutex_;
  // Keyed by TraceCache::Key(tenant, id).
  absl::flat_hash_map<std::string, Entry> traces_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, TenantUsage> usage_ ABSL_GUARDED_BY(mutex_);
};

// One file per trace (written atomically with fsync): the anonymous
// tenant's in the directory, a named tenant's in <dir>/tenants/<tenant>.
// The file's mtime is its creation time for retention. Survives restarts.
class DirectoryTraceStore : public TraceStore {
 public:
  // Creates the directory if needed, and deletes the temporary files
  // (NAME.trace.PID.tmp) that writers killed mid-write left behind: those
  // of this process's PID (it has written nothing yet) and of PIDs no
  // process has. A live process's in-flight file is kept.
  static absl::StatusOr<std::unique_ptr<DirectoryTraceStore>> Open(const std::string& dir,
                                                                   TraceStoreOptions options = {});

  absl::StatusOr<StoredTrace> Put(const std::string& tenant,
                                  const habitat::v1::Trace& trace) override;
  absl::StatusOr<std::shared_ptr<const habitat::v1::Trace>> Get(const std::string& tenant,
                                                                const std::string& id) override;
  absl::StatusOr<size_t> Count() override;
  absl::StatusOr<size_t> DeleteOlderThan(absl::Time cutoff) override;
  std::string Describe() const override { return "dir:" + dir_; }

 private:
  DirectoryTraceStore(std::string dir, TraceStoreOptions options)
      : dir_(std::move(dir)),
        clock_(std::move(options.clock)),
        quota_(options.quota),
        cache_(options.cache_bytes) {}
  // The tenant's directory; INTERNAL for names that are not safe as paths.
  absl::StatusOr<std::string> TenantDir(const std::string& tenant) const;
  // Every directory holding traces: the root and each tenant's.
  std::vector<std::string> AllDirs() const;
  // The orphaned temporary files Open deletes; returns how many.
  size_t SweepOrphanedTemporaryFiles() const;
  // What the tenant directory `dir` holds (not counted without a quota).
  TenantUsage UsageOf(const std::string& dir) const;

  const std::string dir_;
  const Clock clock_;
  const TenantQuota quota_;
  // Serialises writes, so that `created` is exact under concurrent uploads.
  absl::Mutex mutex_;
  TraceCache cache_;
};

}  // namespace habitat
