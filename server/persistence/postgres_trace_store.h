// A store in PostgreSQL, for several server replicas sharing one store.
// Same table as SqliteTraceStore (habitat_traces: tenant, id, size_bytes,
// created_at in Unix nanoseconds, data = gzip of the serialised trace,
// primary key (tenant, id)), created at first start. An upload is
// acknowledged after its INSERT commits; the same trace uploaded through two
// replicas at once is stored once (ON CONFLICT DO NOTHING).
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

typedef struct pg_conn PGconn;

namespace habitat {

class PostgresTraceStore : public TraceStore {
 public:
  // `conninfo` is a libpq connection string ("host=db dbname=habitat
  // user=habitat") or URI ("postgresql://habitat@db/habitat"); passwords
  // are best left to ~/.pgpass or PGPASSWORD. Connects (10 s timeout unless
  // the string sets connect_timeout) and creates the table if missing.
  static absl::StatusOr<std::unique_ptr<PostgresTraceStore>> Open(const std::string& conninfo,
                                                                  TraceStoreOptions options = {});
  ~PostgresTraceStore() override;

  absl::StatusOr<StoredTrace> Put(const std::string& tenant,
                                  const habitat::v1::Trace& trace) override;
  absl::StatusOr<std::shared_ptr<const habitat::v1::Trace>> Get(const std::string& tenant,
                                                                const std::string& id) override;
  absl::StatusOr<size_t> Count() override;
  absl::StatusOr<size_t> DeleteOlderThan(absl::Time cutoff) override;
  // "postgres:host=... port=... dbname=... user=...", without a password.
  std::string Describe() const override { return "postgres:" + target_; }
  bool AnswersLocally() const override { return false; }
  // The host, port, database and user a connection string names (never
  // its password); INVALID_ARGUMENT if it does not parse.
  static absl::StatusOr<std::string> DescribeTarget(const std::string& conninfo);

  // Connections opened at most; calls beyond wait for a free one.
  static constexpr int kMaxConnections = 8;

 private:
  class Lease;
  class Result;
  PostgresTraceStore(std::string conninfo, std::string target, TraceStoreOptions options);

  absl::StatusOr<Lease> Borrow(const char* operation);
  void Return(PGconn* conn);
  bool CanBorrow() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool_mutex_);
  absl::StatusOr<PGconn*> Connect(const char* operation);
  // Runs one parameterised statement (params in text format unless listed
  // in `binary`); on a lost connection, reconnects and runs it once more
  // (every statement here is safe to repeat).
  absl::StatusOr<Result> Run(Lease& lease, const char* operation, const char* sql,
                             const std::vector<std::string>& params,
                             const std::vector<bool>& binary = {}, bool binary_result = false);
  absl::Status Error(const char* operation, const std::string& detail) const;
  // After an INSERT that changed nothing: OK if the tenant had the trace,
  // else the quota's RESOURCE_EXHAUSTED.
  absl::Status WhyNotInserted(Lease& lease, const std::string& tenant, const EncodedTrace& encoded);

  const std::string conninfo_;
  // Where, for messages: host, port, database, user.
  const std::string target_;
  const TraceStoreOptions options_;
  absl::Mutex pool_mutex_;
  std::vector<PGconn*> idle_ ABSL_GUARDED_BY(pool_mutex_);
  int open_connections_ ABSL_GUARDED_BY(pool_mutex_) = 0;
  TraceCache cache_;
  CachedCount count_;
};

}  // namespace habitat
