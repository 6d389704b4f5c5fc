#include "server/persistence/trace_store_factory.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/persistence/postgres_trace_store.h"
#include "server/persistence/sqlite_trace_store.h"

namespace habitat {
namespace {

constexpr char kForms[] =
    "expected sqlite:PATH, postgres:CONNINFO (or a postgresql:// URI), dir:PATH or memory";

}  // namespace

absl::StatusOr<StoreSpec> ParseStoreSpec(const std::string& spec) {
  using Kind = StoreSpec::Kind;
  if (spec == "memory") return StoreSpec{Kind::kMemory, ""};
  // A URI is a whole libpq connection string: keep its scheme.
  if (absl::StartsWith(spec, "postgresql://") || absl::StartsWith(spec, "postgres://")) {
    return StoreSpec{Kind::kPostgres, spec};
  }
  const std::pair<absl::string_view, Kind> prefixes[] = {
      {"sqlite:", Kind::kSqlite}, {"postgres:", Kind::kPostgres}, {"dir:", Kind::kDirectory}};
  for (const auto& [prefix, kind] : prefixes) {
    absl::string_view rest = spec;
    if (!absl::ConsumePrefix(&rest, prefix)) continue;
    if (rest.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("store '", spec, "' names no ",
                       kind == Kind::kPostgres ? "connection string" : "path", "; ", kForms));
    }
    return StoreSpec{kind, std::string(rest)};
  }
  return absl::InvalidArgumentError(absl::StrCat("store '", spec, "' is not known; ", kForms));
}

std::string DescribeStoreSpec(const std::string& spec) {
  auto parsed = ParseStoreSpec(spec);
  if (!parsed.ok() || parsed->kind != StoreSpec::Kind::kPostgres) return spec;
  auto target = PostgresTraceStore::DescribeTarget(parsed->location);
  return absl::StrCat("postgres:", target.ok() ? *target : "(unparsable connection string)");
}

absl::StatusOr<std::unique_ptr<TraceStore>> OpenTraceStore(const std::string& spec,
                                                           TraceStoreOptions options) {
  auto parsed = ParseStoreSpec(spec);
  if (!parsed.ok()) return parsed.status();
  switch (parsed->kind) {
    case StoreSpec::Kind::kMemory:
      return std::make_unique<InMemoryTraceStore>(std::move(options));
    case StoreSpec::Kind::kDirectory: {
      auto store = DirectoryTraceStore::Open(parsed->location, std::move(options));
      if (!store.ok()) return store.status();
      return std::unique_ptr<TraceStore>(std::move(*store));
    }
    case StoreSpec::Kind::kSqlite: {
      auto store = SqliteTraceStore::Open(parsed->location, std::move(options));
      if (!store.ok()) return store.status();
      return std::unique_ptr<TraceStore>(std::move(*store));
    }
    case StoreSpec::Kind::kPostgres: {
      auto store = PostgresTraceStore::Open(parsed->location, std::move(options));
      if (!store.ok()) return store.status();
      return std::unique_ptr<TraceStore>(std::move(*store));
    }
  }
  return absl::InternalError("unhandled store kind");
}

std::string DefaultSqlitePath(const std::function<const char*(const char*)>& getenv) {
  auto set = [&](const char* name) -> std::string {
    const char* value = getenv(name);
    // Relative values are ignored, as the XDG base directory spec says.
    return value != nullptr && value[0] == '/' ? std::string(value) : std::string();
  };
  // systemd may list several directories, separated by ':'.
  if (std::string state = set("STATE_DIRECTORY"); !state.empty()) {
    return absl::StrCat(state.substr(0, state.find(':')), "/traces.db");
  }
  if (std::string xdg = set("XDG_STATE_HOME"); !xdg.empty()) {
    return absl::StrCat(xdg, "/habitat/traces.db");
  }
  if (std::string home = set("HOME"); !home.empty() && home != "/") {
    return absl::StrCat(home, "/.local/state/habitat/traces.db");
  }
  return "/var/lib/habitat/traces.db";
}

}  // namespace habitat
