#include "server/persistence/postgres_trace_store.h"

#include <endian.h>
#include <libpq-fe.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "server/persistence/trace_codec.h"

namespace habitat {
namespace {

// The advisory lock makes replicas that start together take turns: CREATE
// TABLE IF NOT EXISTS is not atomic in PostgreSQL. Its key is any fixed
// number ("habitat" in ASCII, big-endian). client_min_messages keeps the
// "already exists, skipping" notices out of the log on every start.
constexpr char kCreateSchema[] = R"sql(
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT pg_advisory_xact_lock(29380472881832308);
CREATE TABLE IF NOT EXISTS habitat_traces (
  tenant     TEXT   NOT NULL,
  id         TEXT   NOT NULL,
  size_bytes BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  data       BYTEA  NOT NULL,
  PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS habitat_traces_created_at ON habitat_traces (created_at);
COMMIT;
)sql";

// libpq's messages end in a newline and may span lines ("...\n\tIs the
// server running ...?"): one line, for logs and statuses.
std::string Trimmed(const char* message) {
  std::string text(absl::StripAsciiWhitespace(message != nullptr ? message : ""));
  std::string line;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n') {
      line += text[i];
      continue;
    }
    while (i + 1 < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[i + 1]))) {
      ++i;
    }
    line += "; ";
  }
  return line;
}

}  // namespace

absl::StatusOr<std::string> PostgresTraceStore::DescribeTarget(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    std::string detail = Trimmed(error != nullptr ? error : "out of memory");
    PQfreemem(error);
    return absl::InvalidArgumentError(
        absl::StrCat("the PostgreSQL trace store's connection string does not parse: ", detail));
  }
  std::vector<std::string> parts;
  for (const char* key : {"host", "hostaddr", "port", "dbname", "user"}) {
    for (PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
      if (std::strcmp(option->keyword, key) == 0 && option->val != nullptr &&
          option->val[0] != '\0') {
        parts.push_back(absl::StrCat(key, "=", option->val));
      }
    }
  }
  PQconninfoFree(options);
  return parts.empty() ? std::string("(libpq defaults)") : absl::StrJoin(parts, " ");
}

namespace {

// SQLSTATE classes as absl codes: UNAVAILABLE for what may pass.
absl::StatusCode CodeFor(const char* sqlstate) {
  const std::string state = sqlstate != nullptr ? sqlstate : "";
  if (state.empty()) return absl::StatusCode::kUnavailable;  // no server answer
  const std::string klass = state.substr(0, 2);
  if (klass == "08" || klass == "57" || klass == "40") return absl::StatusCode::kUnavailable;
  if (klass == "53") return absl::StatusCode::kResourceExhausted;
  if (klass == "28" || klass == "42") return absl::StatusCode::kFailedPrecondition;
  return absl::StatusCode::kInternal;
}

int64_t BigEndianInt64(const char* bytes) {
  uint64_t value;
  std::memcpy(&value, bytes, sizeof(value));
  return static_cast<int64_t>(be64toh(value));
}

}  // namespace

// One PGresult, cleared on scope exit.
class PostgresTraceStore::Result {
 public:
  explicit Result(PGresult* result) : result_(result) {}
  Result(Result&& other) noexcept : result_(std::exchange(other.result_, nullptr)) {}
  Result& operator=(Result&&) = delete;
  ~Result() { PQclear(result_); }
  PGresult* get() const { return result_; }
  int rows() const { return PQntuples(result_); }
  // Rows an INSERT or DELETE changed.
  int64_t changed() const {
    int64_t n = 0;
    return absl::SimpleAtoi(PQcmdTuples(result_), &n) ? n : 0;
  }

 private:
  PGresult* result_;
};

// A borrowed connection, returned to the pool on destruction.
class PostgresTraceStore::Lease {
 public:
  Lease(PostgresTraceStore* store, PGconn* conn) : store_(store), conn_(conn) {}
  Lease(Lease&& other) noexcept
      : store_(other.store_), conn_(std::exchange(other.conn_, nullptr)) {}
  Lease& operator=(Lease&&) = delete;
  ~Lease() {
    if (conn_ != nullptr) store_->Return(conn_);
  }
  PGconn* conn() const { return conn_; }

 private:
  PostgresTraceStore* store_;
  PGconn* conn_;
};

PostgresTraceStore::PostgresTraceStore(std::string conninfo, std::string target,
                                       TraceStoreOptions options)
    : conninfo_(std::move(conninfo)),
      target_(std::move(target)),
      options_(std::move(options)),
      cache_(options_.cache_bytes),
      count_(options_.count_refresh) {}

PostgresTraceStore::~PostgresTraceStore() {
  absl::MutexLock lock(&pool_mutex_);
  for (PGconn* conn : idle_) PQfinish(conn);
}

absl::Status PostgresTraceStore::Error(const char* operation, const std::string& detail) const {
  return absl::UnavailableError(
      absl::StrCat("PostgreSQL trace store (", target_, "): ", operation, " failed: ", detail));
}

absl::StatusOr<std::unique_ptr<PostgresTraceStore>> PostgresTraceStore::Open(
    const std::string& conninfo, TraceStoreOptions options) {
  if (conninfo.empty()) {
    return absl::InvalidArgumentError(
        "the PostgreSQL trace store needs a connection string (postgres:CONNINFO)");
  }
  if (PQisthreadsafe() == 0) {
    return absl::FailedPreconditionError(
        "libpq was built without thread support; the trace store needs it");
  }
  HABITAT_ASSIGN_OR_RETURN(std::string target, DescribeTarget(conninfo));
  std::unique_ptr<PostgresTraceStore> store(
      new PostgresTraceStore(conninfo, std::move(target), std::move(options)));
  HABITAT_ASSIGN_OR_RETURN(Lease lease, store->Borrow("connect"));
  // CREATE ... IF NOT EXISTS needs the CREATE privilege even when the table
  // is there: look first, so that a role with only SELECT, INSERT and DELETE
  // on an existing table can run the server.
  HABITAT_ASSIGN_OR_RETURN(Result exists,
                           store->Run(lease, "look for the table",
                                      "SELECT to_regclass('habitat_traces') IS NOT NULL", {}));
  if (exists.rows() == 1 && std::strcmp(PQgetvalue(exists.get(), 0, 0), "t") == 0) {
    return store;
  }
  Result created(PQexec(lease.conn(), kCreateSchema));
  if (PQresultStatus(created.get()) != PGRES_COMMAND_OK) {
    const std::string detail = Trimmed(PQerrorMessage(lease.conn()));
    // The multi-statement string may leave a failed transaction open.
    PQclear(PQexec(lease.conn(), "ROLLBACK"));
    return absl::Status(CodeFor(PQresultErrorField(created.get(), PG_DIAG_SQLSTATE)),
                        absl::StrCat("PostgreSQL trace store (", store->target_,
                                     "): create the schema failed: ", detail));
  }
  return store;
}

absl::StatusOr<PGconn*> PostgresTraceStore::Connect(const char* operation) {
  // Keywords are applied in order and the expanded dbname string comes
  // last, so the operator's connect_timeout wins over this default.
  const char* keywords[] = {"connect_timeout", "fallback_application_name", "dbname", nullptr};
  const char* values[] = {"10", "habitat-server", conninfo_.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) return Error(operation, "out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    absl::Status status = Error(operation, Trimmed(PQerrorMessage(conn)));
    PQfinish(conn);
    return status;
  }
  return conn;
}

bool PostgresTraceStore::CanBorrow() const {
  return !idle_.empty() || open_connections_ < kMaxConnections;
}

absl::StatusOr<PostgresTraceStore::Lease> PostgresTraceStore::Borrow(const char* operation) {
  pool_mutex_.LockWhen(absl::Condition(this, &PostgresTraceStore::CanBorrow));
  if (!idle_.empty()) {
    PGconn* conn = idle_.back();
    idle_.pop_back();
    pool_mutex_.Unlock();
    return Lease(this, conn);
  }
  ++open_connections_;  // reserved while connecting, outside the lock
  pool_mutex_.Unlock();
  auto conn = Connect(operation);
  if (!conn.ok()) {
    absl::MutexLock lock(&pool_mutex_);
    --open_connections_;
    return conn.status();
  }
  return Lease(this, *conn);
}

void PostgresTraceStore::Return(PGconn* conn) {
  absl::MutexLock lock(&pool_mutex_);
  idle_.push_back(conn);
}

absl::StatusOr<PostgresTraceStore::Result> PostgresTraceStore::Run(
    Lease& lease, const char* operation, const char* sql, const std::vector<std::string>& params,
    const std::vector<bool>& binary, bool binary_result) {
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  for (size_t i = 0; i < params.size(); ++i) {
    values.push_back(params[i].data());
    lengths.push_back(static_cast<int>(params[i].size()));
    formats.push_back(i < binary.size() && binary[i] ? 1 : 0);
  }
  for (int attempt = 0;; ++attempt) {
    Result result(PQexecParams(lease.conn(), sql, static_cast<int>(params.size()), nullptr,
                               values.data(), lengths.data(), formats.data(),
                               binary_result ? 1 : 0));
    const ExecStatusType status = PQresultStatus(result.get());
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
    // A server restart or a dropped connection: reconnect and try again
    // once; the statement either committed before or did not run.
    if (attempt == 0 && PQstatus(lease.conn()) == CONNECTION_BAD) {
      PQreset(lease.conn());
      if (PQstatus(lease.conn()) == CONNECTION_OK) continue;
    }
    const char* sqlstate =
        result.get() != nullptr ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
    return absl::Status(CodeFor(sqlstate),
                        absl::StrCat("PostgreSQL trace store (", target_, "): ", operation,
                                     " failed: ", Trimmed(PQerrorMessage(lease.conn()))));
  }
}

absl::StatusOr<StoredTrace> PostgresTraceStore::Put(const std::string& tenant,
                                                    const v1::Trace& trace) {
  HABITAT_RETURN_IF_ERROR(CheckTenantName(tenant));
  HABITAT_ASSIGN_OR_RETURN(EncodedTrace encoded, EncodeTrace(trace));
  HABITAT_ASSIGN_OR_RETURN(Lease lease, Borrow("store a trace"));
  // The quota is checked in the statement that inserts. Under READ
  // COMMITTED, concurrent uploads of one tenant (on any replica) can each
  // see the last room free, so the quota can be passed by the uploads in
  // flight at that moment.
  HABITAT_ASSIGN_OR_RETURN(
      Result inserted,
      Run(lease, "store a trace",
          "INSERT INTO habitat_traces (tenant, id, size_bytes, created_at, data) "
          "SELECT $1::text, $2::text, $3::bigint, $4::bigint, $5::bytea WHERE (SELECT "
          "COUNT(*) < $6::bigint AND COALESCE(SUM(size_bytes), 0) <= $7::bigint - $3::bigint "
          "FROM habitat_traces WHERE tenant = $1::text) ON CONFLICT (tenant, id) DO NOTHING",
          {tenant, encoded.id, absl::StrCat(encoded.size_bytes),
           absl::StrCat(absl::ToUnixNanos(options_.clock())), encoded.blob,
           absl::StrCat(QuotaLimit(options_.quota.max_traces)),
           absl::StrCat(QuotaLimit(options_.quota.max_bytes))},
          {false, false, false, false, true, false, false}));
  const bool created = inserted.changed() > 0;
  if (created) {
    count_.Add(1);
  } else {
    HABITAT_RETURN_IF_ERROR(WhyNotInserted(lease, tenant, encoded));
  }
  return StoredTrace{std::move(encoded.id), created};
}

absl::Status PostgresTraceStore::WhyNotInserted(Lease& lease, const std::string& tenant,
                                                const EncodedTrace& encoded) {
  HABITAT_ASSIGN_OR_RETURN(
      Result usage, Run(lease, "check a tenant's quota",
                        "SELECT COUNT(*), COALESCE(SUM(size_bytes), 0), "
                        "COALESCE(BOOL_OR(id = $2), false) FROM habitat_traces WHERE tenant = $1",
                        {tenant, encoded.id}));
  TenantUsage used;
  if (usage.rows() != 1 || !absl::SimpleAtoi(PQgetvalue(usage.get(), 0, 0), &used.traces) ||
      !absl::SimpleAtoi(PQgetvalue(usage.get(), 0, 1), &used.bytes)) {
    return Error("check a tenant's quota", "unexpected answer to SELECT COUNT(*), SUM(...)");
  }
  if (std::string_view(PQgetvalue(usage.get(), 0, 2)) == "t") return absl::OkStatus();
  return WhyNotStored(options_.quota, used, encoded.size_bytes);
}

absl::StatusOr<std::shared_ptr<const v1::Trace>> PostgresTraceStore::Get(const std::string& tenant,
                                                                         const std::string& id) {
  HABITAT_RETURN_IF_ERROR(CheckTraceId(id));
  HABITAT_RETURN_IF_ERROR(CheckTenantName(tenant));
  const std::string key = TraceCache::Key(tenant, id);
  HABITAT_ASSIGN_OR_RETURN(Lease lease, Borrow("read a trace"));
  if (auto cached = cache_.Find(key)) {
    // Retention, possibly on another replica, may have deleted it since.
    HABITAT_ASSIGN_OR_RETURN(
        Result exists,
        Run(lease, "look a trace up", "SELECT 1 FROM habitat_traces WHERE tenant = $1 AND id = $2",
            {tenant, id}));
    if (exists.rows() == 0) return TraceNotFoundError(id);
    return cached;
  }
  HABITAT_ASSIGN_OR_RETURN(
      Result row, Run(lease, "read a trace",
                      "SELECT size_bytes, data FROM habitat_traces WHERE tenant = $1 AND id = $2",
                      {tenant, id}, {}, /*binary_result=*/true));
  if (row.rows() == 0) return TraceNotFoundError(id);
  const std::string where = absl::StrCat("stored trace ", id, " in PostgreSQL (", target_, ")");
  if (PQgetlength(row.get(), 0, 0) != 8) {
    return absl::DataLossError(absl::StrCat(where, " has a malformed size_bytes"));
  }
  const int64_t size_bytes = BigEndianInt64(PQgetvalue(row.get(), 0, 0));
  HABITAT_ASSIGN_OR_RETURN(
      std::shared_ptr<const v1::Trace> trace,
      DecodeTrace(absl::string_view(PQgetvalue(row.get(), 0, 1),
                                    static_cast<size_t>(PQgetlength(row.get(), 0, 1))),
                  size_bytes, where));
  cache_.Insert(key, trace);
  return trace;
}

absl::StatusOr<size_t> PostgresTraceStore::Count() {
  return count_.Get([this]() -> absl::StatusOr<int64_t> {
    HABITAT_ASSIGN_OR_RETURN(Lease lease, Borrow("count traces"));
    HABITAT_ASSIGN_OR_RETURN(Result count,
                             Run(lease, "count traces", "SELECT COUNT(*) FROM habitat_traces", {}));
    int64_t n = 0;
    if (count.rows() != 1 || !absl::SimpleAtoi(PQgetvalue(count.get(), 0, 0), &n)) {
      return Error("count traces", "unexpected answer to SELECT COUNT(*)");
    }
    return n;
  });
}

absl::StatusOr<size_t> PostgresTraceStore::DeleteOlderThan(absl::Time cutoff) {
  HABITAT_ASSIGN_OR_RETURN(Lease lease, Borrow("delete old traces"));
  HABITAT_ASSIGN_OR_RETURN(Result deleted, Run(lease, "delete old traces",
                                               "DELETE FROM habitat_traces WHERE created_at < $1",
                                               {absl::StrCat(absl::ToUnixNanos(cutoff))}));
  const int64_t n = deleted.changed();
  count_.Add(-n);
  if (n > 0) cache_.Clear();
  return static_cast<size_t>(n);
}

}  // namespace habitat
