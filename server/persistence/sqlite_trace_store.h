// The default store: one SQLite file (WAL mode, synchronous=FULL), so a
// trace is on disk before UploadTrace answers and survives a crash of the
// process or the machine. For one server process; replicas that share a
// store use PostgresTraceStore.
//
// Schema (user_version 1):
//   habitat_traces(tenant TEXT, id TEXT, size_bytes INTEGER,
//                  created_at INTEGER, data BLOB, PRIMARY KEY (tenant, id))
// id is the content address "sha256:<hex>", data the gzip of the serialised
// habitat.v1.Trace, size_bytes its uncompressed size, created_at Unix
// nanoseconds (indexed, for retention).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/store/trace_cache.h"
#include "core/store/trace_store.h"
#include "server/persistence/cached_count.h"
#include "server/persistence/trace_codec.h"

struct sqlite3;
struct sqlite3_stmt;

namespace habitat {

class SqliteTraceStore : public TraceStore {
 public:
  // Opens or creates the file (and its missing parent directories) and the
  // schema. Errors name the file and what failed.
  static absl::StatusOr<std::unique_ptr<SqliteTraceStore>> Open(const std::string& path,
                                                                TraceStoreOptions options = {});
  ~SqliteTraceStore() override;

  absl::StatusOr<StoredTrace> Put(const std::string& tenant,
                                  const habitat::v1::Trace& trace) override;
  absl::StatusOr<std::shared_ptr<const habitat::v1::Trace>> Get(const std::string& tenant,
                                                                const std::string& id) override;
  absl::StatusOr<size_t> Count() override;
  absl::StatusOr<size_t> DeleteOlderThan(absl::Time cutoff) override;
  std::string Describe() const override { return "sqlite:" + path_; }

  // Connections opened at most; calls beyond wait for a free one.
  static constexpr int kMaxConnections = 4;

 private:
  class Lease;
  // A pooled connection and its statements prepared once (null until used).
  struct Connection {
    sqlite3* db = nullptr;
    sqlite3_stmt* exists = nullptr;
  };
  SqliteTraceStore(std::string path, TraceStoreOptions options);

  // A connection for one call: an idle one, a new one, or the next freed.
  absl::StatusOr<Lease> Borrow();
  void Return(Connection connection);
  bool CanBorrow() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool_mutex_);
  // Opens one more connection in WAL mode with synchronous=FULL.
  absl::StatusOr<sqlite3*> Connect();
  // After an INSERT that changed nothing: OK if the tenant had the trace,
  // else the quota's RESOURCE_EXHAUSTED.
  absl::Status WhyNotInserted(sqlite3* db, const std::string& tenant, const EncodedTrace& encoded);

  const std::string path_;
  const TraceStoreOptions options_;
  absl::Mutex pool_mutex_;
  std::vector<Connection> idle_ ABSL_GUARDED_BY(pool_mutex_);
  int open_connections_ ABSL_GUARDED_BY(pool_mutex_) = 0;
  TraceCache cache_;
  CachedCount count_;
};

}  // namespace habitat
