#include "server/persistence/sqlite_trace_store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/persistence/trace_codec.h"

namespace habitat {
namespace {

constexpr int kSchemaVersion = 1;
// Long enough to ride out another connection's commit (an fsync) or a
// retention sweep's batch; short enough that a wedged writer surfaces.
constexpr int kBusyTimeoutMs = 10000;
// Retention deletes this many rows per statement, so that uploads are not
// held off by one long write transaction.
constexpr int kDeleteBatch = 500;

constexpr char kCreateSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS habitat_traces (
  tenant     TEXT    NOT NULL,
  id         TEXT    NOT NULL,
  size_bytes INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  data       BLOB    NOT NULL,
  PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS habitat_traces_created_at ON habitat_traces (created_at);
)sql";

// SQLite result codes as absl codes: UNAVAILABLE for what may pass (busy,
// I/O), DATA_LOSS for a damaged file.
absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status SqliteError(const std::string& path, absl::string_view operation, sqlite3* db,
                         int rc) {
  const char* detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return absl::Status(CodeFor(rc), absl::StrCat("SQLite trace store '", path, "': ", operation,
                                                " failed: ", detail));
}

// One prepared statement, finalised on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, absl::string_view operation)
      : db_(db), path_(path), operation_(operation) {}
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  absl::Status Prepare(const char* sql) {
    const int rc = sqlite3_prepare_v2(db_, sql, -1, &stmt_, nullptr);
    return rc == SQLITE_OK ? absl::OkStatus() : Error(rc);
  }
  // The bound values must outlive Step() (SQLITE_STATIC: no copy of a
  // possibly large blob).
  void BindText(int index, const std::string& text) {
    sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
  }
  void BindBlob(int index, const std::string& blob) {
    sqlite3_bind_blob(stmt_, index, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
  }
  void BindInt64(int index, int64_t value) { sqlite3_bind_int64(stmt_, index, value); }
  // True for a row, false when done.
  absl::StatusOr<bool> Step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return Error(rc);
  }
  absl::Status Run() { return Step().status(); }
  sqlite3_stmt* get() { return stmt_; }
  absl::Status Error(int rc) const { return SqliteError(path_, operation_, db_, rc); }

 private:
  sqlite3* db_;
  const std::string& path_;
  absl::string_view operation_;
  sqlite3_stmt* stmt_ = nullptr;
};

absl::Status Exec(sqlite3* db, const std::string& path, absl::string_view operation,
                  const char* sql) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? absl::OkStatus() : SqliteError(path, operation, db, rc);
}

// The first column of the first row of `sql`, as text.
absl::StatusOr<std::string> QueryText(sqlite3* db, const std::string& path,
                                      absl::string_view operation, const char* sql) {
  Statement statement(db, path, operation);
  HABITAT_RETURN_IF_ERROR(statement.Prepare(sql));
  HABITAT_ASSIGN_OR_RETURN(bool row, statement.Step());
  if (!row) return std::string();
  const unsigned char* text = sqlite3_column_text(statement.get(), 0);
  return std::string(text != nullptr ? reinterpret_cast<const char*>(text) : "");
}

// mkdir -p of the file's directory (the default path's may not exist yet).
absl::Status MakeParentDirectories(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0750) == 0) continue;
    const int error = errno;
    struct stat info;
    if (error == EEXIST && ::stat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) continue;
    return absl::UnavailableError(absl::StrCat(
        "SQLite trace store '", path, "': cannot create directory '", dir,
        "': ", error == EEXIST ? "it exists and is not a directory" : std::strerror(error)));
  }
  return absl::OkStatus();
}

// An existing file of 0 bytes is a store that lost its contents (truncated,
// or a failed copy), not a new one: starting on it would silently serve an
// empty store.
absl::Status RefuseAnEmptyFile(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_size != 0) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "SQLite trace store '", path,
      "' exists but is empty (0 bytes): its traces are gone, or it is not a trace store. "
      "Restore it from a backup, or remove the file to start a new, empty store"));
}

// A database that already holds other tables but no schema version belongs
// to something else; the store would add its table beside them. (Our own
// table may already be there: another server creating the schema on the
// same new file has committed since the version was read.)
absl::Status RefuseAForeignDatabase(sqlite3* db, const std::string& path) {
  HABITAT_ASSIGN_OR_RETURN(std::string tables,
                           QueryText(db, path, "list the tables",
                                     "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                     "AND name <> 'habitat_traces'"));
  if (std::atoi(tables.c_str()) == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "SQLite trace store '", path, "' is a SQLite database with ", tables,
      " table(s) but no habitat schema version: not a trace store; name another file"));
}

absl::Status CreateSchema(sqlite3* db, const std::string& path) {
  HABITAT_ASSIGN_OR_RETURN(std::string version,
                           QueryText(db, path, "read the schema version", "PRAGMA user_version"));
  const int user_version = std::atoi(version.c_str());
  if (user_version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "SQLite trace store '", path, "': schema version ", user_version,
        " is newer than this server's (", kSchemaVersion, "); use a newer habitat-server"));
  }
  if (user_version == kSchemaVersion) return absl::OkStatus();
  HABITAT_RETURN_IF_ERROR(RefuseAForeignDatabase(db, path));
  // Only takes effect before the first table: lets retention give pages
  // back to the file system (PRAGMA incremental_vacuum).
  HABITAT_RETURN_IF_ERROR(
      Exec(db, path, "enable incremental vacuum", "PRAGMA auto_vacuum = INCREMENTAL"));
  // IMMEDIATE: two servers creating the same new file take turns.
  HABITAT_RETURN_IF_ERROR(Exec(db, path, "begin creating the schema", "BEGIN IMMEDIATE"));
  absl::Status created = Exec(db, path, "create the schema", kCreateSchema);
  if (created.ok()) {
    created = Exec(db, path, "set the schema version",
                   absl::StrCat("PRAGMA user_version = ", kSchemaVersion).c_str());
  }
  if (created.ok()) created = Exec(db, path, "commit the schema", "COMMIT");
  if (!created.ok()) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  return created;
}

}  // namespace

// A borrowed connection, returned to the pool on destruction.
class SqliteTraceStore::Lease {
 public:
  Lease(SqliteTraceStore* store, Connection connection) : store_(store), connection_(connection) {}
  Lease(Lease&& other) noexcept
      : store_(other.store_), connection_(std::exchange(other.connection_, Connection{})) {}
  Lease& operator=(Lease&&) = delete;
  ~Lease() {
    if (connection_.db != nullptr) store_->Return(connection_);
  }
  sqlite3* db() const { return connection_.db; }

  // The connection's statement that looks a trace up, prepared once: a
  // repeated Predict by id runs it on every call, and preparing it cost
  // more than running it (docs/benchmarks.md, "Warm path"). Reset and
  // unbound on each use.
  absl::StatusOr<sqlite3_stmt*> ExistsStatement(const std::string& path) {
    if (connection_.exists == nullptr) {
      const int rc = sqlite3_prepare_v3(
          connection_.db, "SELECT 1 FROM habitat_traces WHERE tenant = ?1 AND id = ?2", -1,
          SQLITE_PREPARE_PERSISTENT, &connection_.exists, nullptr);
      if (rc != SQLITE_OK) return SqliteError(path, "look a trace up", connection_.db, rc);
    }
    sqlite3_reset(connection_.exists);
    sqlite3_clear_bindings(connection_.exists);
    return connection_.exists;
  }

 private:
  SqliteTraceStore* store_;
  Connection connection_;
};

SqliteTraceStore::SqliteTraceStore(std::string path, TraceStoreOptions options)
    : path_(std::move(path)),
      options_(std::move(options)),
      cache_(options_.cache_bytes),
      count_(options_.count_refresh) {}

SqliteTraceStore::~SqliteTraceStore() {
  absl::MutexLock lock(&pool_mutex_);
  for (const Connection& connection : idle_) {
    sqlite3_finalize(connection.exists);
    sqlite3_close_v2(connection.db);
  }
}

absl::StatusOr<std::unique_ptr<SqliteTraceStore>> SqliteTraceStore::Open(
    const std::string& path, TraceStoreOptions options) {
  if (path.empty()) {
    return absl::InvalidArgumentError("the SQLite trace store needs a file path (sqlite:PATH)");
  }
  if (sqlite3_threadsafe() == 0) {
    return absl::FailedPreconditionError(
        "the SQLite library was built without thread support; the trace store needs it");
  }
  HABITAT_RETURN_IF_ERROR(MakeParentDirectories(path));
  HABITAT_RETURN_IF_ERROR(RefuseAnEmptyFile(path));
  std::unique_ptr<SqliteTraceStore> store(new SqliteTraceStore(path, std::move(options)));
  HABITAT_ASSIGN_OR_RETURN(Lease lease, store->Borrow());
  HABITAT_RETURN_IF_ERROR(CreateSchema(lease.db(), path));
  return store;
}

absl::StatusOr<sqlite3*> SqliteTraceStore::Connect() {
  sqlite3* db = nullptr;
  // NOMUTEX: the pool hands each connection to one thread at a time.
  int rc =
      sqlite3_open_v2(path_.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  absl::Status status;
  if (rc != SQLITE_OK) {
    status = SqliteError(path_, "open the database file", db, rc);
  } else {
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, kBusyTimeoutMs);
    // The first statement reads the file: a file that is not a database
    // fails here.
    auto mode = QueryText(db, path_, "set WAL mode", "PRAGMA journal_mode = WAL");
    if (!mode.ok()) {
      status = mode.status();
    } else if (*mode != "wal") {
      status = absl::FailedPreconditionError(absl::StrCat(
          "SQLite trace store '", path_,
          "': the file system does not support WAL mode (journal mode '", *mode, "')"));
    } else {
      // FULL: a commit (an acknowledged upload) survives power loss too,
      // not only a crash of this process.
      status = Exec(db, path_, "set synchronous mode", "PRAGMA synchronous = FULL");
    }
  }
  if (!status.ok()) {
    sqlite3_close_v2(db);
    return status;
  }
  return db;
}

absl::StatusOr<SqliteTraceStore::Lease> SqliteTraceStore::Borrow() {
  pool_mutex_.LockWhen(absl::Condition(this, &SqliteTraceStore::CanBorrow));
  if (!idle_.empty()) {
    const Connection connection = idle_.back();
    idle_.pop_back();
    pool_mutex_.Unlock();
    return Lease(this, connection);
  }
  ++open_connections_;  // reserved while connecting, outside the lock
  pool_mutex_.Unlock();
  auto db = Connect();
  if (!db.ok()) {
    absl::MutexLock lock(&pool_mutex_);
    --open_connections_;
    return db.status();
  }
  return Lease(this, Connection{*db, nullptr});
}

bool SqliteTraceStore::CanBorrow() const {
  return !idle_.empty() || open_connections_ < kMaxConnections;
}

void SqliteTraceStore::Return(Connection connection) {
  absl::MutexLock lock(&pool_mutex_);
  idle_.push_back(connection);
}

absl::StatusOr<StoredTrace> SqliteTraceStore::Put(const std::string& tenant,
                                                  const v1::Trace& trace) {
  HABITAT_RETURN_IF_ERROR(CheckTenantName(tenant));
  HABITAT_ASSIGN_OR_RETURN(EncodedTrace encoded, EncodeTrace(trace));
  HABITAT_ASSIGN_OR_RETURN(Lease lease, Borrow());
  Statement insert(lease.db(), path_, "store a trace");
  // The quota is checked in the statement that inserts, so concurrent
  // uploads cannot both take the last room.
  HABITAT_RETURN_IF_ERROR(insert.Prepare(
      "INSERT INTO habitat_traces (tenant, id, size_bytes, created_at, data) "
      "SELECT ?1, ?2, ?3, ?4, ?5 WHERE (SELECT COUNT(*) < ?6 AND "
      "COALESCE(SUM(size_bytes), 0) <= ?7 - ?3 FROM habitat_traces WHERE tenant = ?1) "
      "ON CONFLICT (tenant, id) DO NOTHING"));
  insert.BindText(1, tenant);
  insert.BindText(2, encoded.id);
  insert.BindInt64(3, encoded.size_bytes);
  insert.BindInt64(4, absl::ToUnixNanos(options_.clock()));
  insert.BindBlob(5, encoded.blob);
  insert.BindInt64(6, QuotaLimit(options_.quota.max_traces));
  insert.BindInt64(7, QuotaLimit(options_.quota.max_bytes));
  // One autocommit statement: committed (and synced) when Step returns.
  HABITAT_RETURN_IF_ERROR(insert.Run());
  const bool created = sqlite3_changes(lease.db()) > 0;
  if (created) {
    count_.Add(1);
  } else {
    HABITAT_RETURN_IF_ERROR(WhyNotInserted(lease.db(), tenant, encoded));
  }
  return StoredTrace{std::move(encoded.id), created};
}

absl::Status SqliteTraceStore::WhyNotInserted(sqlite3* db, const std::string& tenant,
                                              const EncodedTrace& encoded) {
  Statement usage(db, path_, "check a tenant's quota");
  HABITAT_RETURN_IF_ERROR(
      usage.Prepare("SELECT COUNT(*), COALESCE(SUM(size_bytes), 0), "
                    "COALESCE(MAX(id = ?2), 0) FROM habitat_traces WHERE tenant = ?1"));
  usage.BindText(1, tenant);
  usage.BindText(2, encoded.id);
  HABITAT_RETURN_IF_ERROR(usage.Step().status());
  if (sqlite3_column_int64(usage.get(), 2) != 0) return absl::OkStatus();  // stored before
  const TenantUsage used{sqlite3_column_int64(usage.get(), 0),
                         sqlite3_column_int64(usage.get(), 1)};
  return WhyNotStored(options_.quota, used, encoded.size_bytes);
}

absl::StatusOr<std::shared_ptr<const v1::Trace>> SqliteTraceStore::Get(const std::string& tenant,
                                                                       const std::string& id) {
  HABITAT_RETURN_IF_ERROR(CheckTraceId(id));
  HABITAT_RETURN_IF_ERROR(CheckTenantName(tenant));
  const std::string key = TraceCache::Key(tenant, id);
  HABITAT_ASSIGN_OR_RETURN(Lease lease, Borrow());
  if (auto cached = cache_.Find(key)) {
    // Retention may have deleted it since: check the row is still there.
    HABITAT_ASSIGN_OR_RETURN(sqlite3_stmt * exists, lease.ExistsStatement(path_));
    sqlite3_bind_text(exists, 1, tenant.data(), static_cast<int>(tenant.size()), SQLITE_STATIC);
    sqlite3_bind_text(exists, 2, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
    const int rc = sqlite3_step(exists);
    sqlite3_reset(exists);  // ends the read transaction
    if (rc == SQLITE_DONE) return TraceNotFoundError(id);
    if (rc != SQLITE_ROW) return SqliteError(path_, "look a trace up", lease.db(), rc);
    return cached;
  }
  Statement select(lease.db(), path_, "read a trace");
  HABITAT_RETURN_IF_ERROR(
      select.Prepare("SELECT size_bytes, data FROM habitat_traces WHERE tenant = ?1 AND id = ?2"));
  select.BindText(1, tenant);
  select.BindText(2, id);
  HABITAT_ASSIGN_OR_RETURN(bool found, select.Step());
  if (!found) return TraceNotFoundError(id);
  const int64_t size_bytes = sqlite3_column_int64(select.get(), 0);
  const void* data = sqlite3_column_blob(select.get(), 1);
  const int length = sqlite3_column_bytes(select.get(), 1);
  HABITAT_ASSIGN_OR_RETURN(
      std::shared_ptr<const v1::Trace> trace,
      DecodeTrace(absl::string_view(static_cast<const char*>(data), static_cast<size_t>(length)),
                  size_bytes, absl::StrCat("stored trace ", id, " in '", path_, "'")));
  cache_.Insert(key, trace);
  return trace;
}

absl::StatusOr<size_t> SqliteTraceStore::Count() {
  return count_.Get([this]() -> absl::StatusOr<int64_t> {
    HABITAT_ASSIGN_OR_RETURN(Lease lease, Borrow());
    Statement count(lease.db(), path_, "count traces");
    HABITAT_RETURN_IF_ERROR(count.Prepare("SELECT COUNT(*) FROM habitat_traces"));
    HABITAT_RETURN_IF_ERROR(count.Step().status());
    return sqlite3_column_int64(count.get(), 0);
  });
}

absl::StatusOr<size_t> SqliteTraceStore::DeleteOlderThan(absl::Time cutoff) {
  HABITAT_ASSIGN_OR_RETURN(Lease lease, Borrow());
  const int64_t cutoff_ns = absl::ToUnixNanos(cutoff);
  size_t deleted = 0;
  while (true) {
    Statement remove(lease.db(), path_, "delete old traces");
    HABITAT_RETURN_IF_ERROR(remove.Prepare(
        "DELETE FROM habitat_traces WHERE rowid IN (SELECT rowid FROM habitat_traces "
        "WHERE created_at < ?1 LIMIT ?2)"));
    remove.BindInt64(1, cutoff_ns);
    remove.BindInt64(2, kDeleteBatch);
    absl::Status ran = remove.Run();
    if (!ran.ok()) {
      count_.Add(-static_cast<int64_t>(deleted));
      return ran;
    }
    const int batch = sqlite3_changes(lease.db());
    deleted += static_cast<size_t>(batch);
    if (batch < kDeleteBatch) break;
  }
  count_.Add(-static_cast<int64_t>(deleted));
  if (deleted > 0) {
    cache_.Clear();
    // Gives the freed pages back to the file system; the traces are gone
    // either way, so a failure here is not the sweep's.
    sqlite3_exec(lease.db(), "PRAGMA incremental_vacuum", nullptr, nullptr, nullptr);
  }
  return deleted;
}

}  // namespace habitat
