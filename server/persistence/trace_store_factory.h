// Which TraceStore to use, from one string (the server's --store flag):
//   memory             in process memory; lost on restart
//   dir:PATH           DirectoryTraceStore: one file per trace
//   sqlite:PATH        SqliteTraceStore: one SQLite file (the server default)
//   postgres:CONNINFO  PostgresTraceStore: shared by replicas; CONNINFO is a
//                      libpq string ("host=db dbname=habitat"). URIs
//                      (postgresql://... or postgres://...) work as they are.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/store/trace_store.h"

namespace habitat {

struct StoreSpec {
  enum class Kind { kMemory, kDirectory, kSqlite, kPostgres };
  Kind kind = Kind::kMemory;
  // Path or connection string; empty for memory.
  std::string location;
};

// INVALID_ARGUMENT, listing the accepted forms, for anything else.
absl::StatusOr<StoreSpec> ParseStoreSpec(const std::string& spec);

// The spec as a log line may show it: a PostgreSQL connection string is
// reduced to host, port, database and user (no password).
std::string DescribeStoreSpec(const std::string& spec);

absl::StatusOr<std::unique_ptr<TraceStore>> OpenTraceStore(const std::string& spec,
                                                           TraceStoreOptions options = {});

// The SQLite file used when no store is named: $STATE_DIRECTORY/traces.db
// (systemd's StateDirectory=), else $XDG_STATE_HOME/habitat/traces.db, else
// $HOME/.local/state/habitat/traces.db, else /var/lib/habitat/traces.db.
std::string DefaultSqlitePath(const std::function<const char*(const char*)>& getenv =
                                  [](const char* name) { return std::getenv(name); });

}  // namespace habitat
