// habitat-server: the prediction service.
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/program_flags.h"
#include "common/resource_dirs.h"
#include "common/status_macros.h"
#include "server/listen_address.h"
#include "server/persistence/trace_store_factory.h"
#include "server/prediction_server.h"

namespace {

// What habitat-server runs with where no flag says otherwise: the library's
// ServerOptions, plus what a deployed server wants that tests and embedders
// do not (a /metrics endpoint, caps on concurrent RPCs and on one
// request's time, the data and models beside the program). Every flag
// takes its default from here.
habitat::ServerOptions ServedDefaults() {
  habitat::ServerOptions options;
  options.metrics_address = ":9464";
  options.max_concurrent_rpcs = 64;
  options.max_request_time = absl::Seconds(30);
  // The source tree's data/ and models/ when run from the build tree, else
  // the installed ones beside the program (common/resource_dirs.h).
  options.backend.data_dir = habitat::DefaultResourceDir(
      HABITAT_BUILD_OUTPUT_DIR, HABITAT_SOURCE_DATA_DIR, HABITAT_INSTALLED_DATA_DIR);
  options.backend.models_dir = habitat::DefaultResourceDir(
      HABITAT_BUILD_OUTPUT_DIR, HABITAT_SOURCE_MODELS_DIR, HABITAT_INSTALLED_MODELS_DIR);
  return options;
}

}  // namespace

ABSL_FLAG(std::string, address, ServedDefaults().address, "gRPC listen address (host:port)");
ABSL_FLAG(std::string, metrics_address, ServedDefaults().metrics_address,
          "Prometheus /metrics listen address (plain HTTP, no authentication); a bare :PORT "
          "listens on the host of --address; empty disables it");
ABSL_FLAG(std::string, health_address, ServedDefaults().health_address,
          "Plaintext listen address serving only grpc.health.v1 (for probes that cannot "
          "speak TLS); empty disables it");
ABSL_FLAG(std::string, data_dir, ServedDefaults().backend.data_dir,
          "Directory with devices.textproto and catalogs/");
ABSL_FLAG(std::string, models_dir, ServedDefaults().backend.models_dir,
          "Directory with kernel_varying/ (the trained predictor for convolutions, matrix "
          "multiplies, LSTMs and attention); a missing or damaged model stops start-up. "
          "'none' runs without it (those ops are then carried over unscaled)");
// Empty: the SQLite default (StoreFromFlags), not ServerOptions::store's memory.
ABSL_FLAG(std::string, store, "",
          "Where uploaded traces are stored: sqlite:PATH, postgres:CONNINFO or a "
          "postgresql:// URI (for replicas sharing one store), dir:PATH, or memory. "
          "Default: sqlite:$STATE_DIRECTORY/traces.db, else "
          "$XDG_STATE_HOME/habitat/traces.db, else ~/.local/state/habitat/traces.db");
ABSL_FLAG(std::optional<std::string>, trace_dir, std::nullopt,
          "Retired: use --store=dir:PATH (or --store=memory); the server refuses to start "
          "when it is given, rather than keep traces somewhere else than before");
ABSL_FLAG(std::string, default_catalog, ServedDefaults().backend.default_catalog,
          "The price catalog for requests that name none: a catalog in <data_dir>/catalogs, "
          "or 'none' for no prices unless asked. Default: aws when present, else none");
ABSL_FLAG(int, trace_retention_days, ServedDefaults().trace_retention_days,
          "Delete traces stored more than this many days ago, at start-up and hourly "
          "(0: keep forever)");
ABSL_FLAG(int64_t, tenant_max_traces, ServedDefaults().tenant_quota.max_traces,
          "Most traces one tenant may keep in the store; uploads beyond are refused with "
          "RESOURCE_EXHAUSTED (0: no limit)");
ABSL_FLAG(int64_t, tenant_max_mib, ServedDefaults().tenant_quota.max_bytes >> 20,
          "Most MiB of traces (serialised size) one tenant may keep in the store (0: no limit)");
ABSL_FLAG(int, cache_entries, static_cast<int>(ServedDefaults().backend.cache_entries),
          "Memoised (trace, device) predictions kept");
ABSL_FLAG(int, cache_mib, static_cast<int>(ServedDefaults().backend.cache_bytes >> 20),
          "Memory the memoised predictions may take, in MiB (0: no cache)");
ABSL_FLAG(int64_t, max_predict_work, ServedDefaults().backend.max_predict_work,
          "Most work one Predict may start: trace entries (operations, kernels, memory "
          "activities, host events) times GPUs not in the cache; more is refused with "
          "RESOURCE_EXHAUSTED before any work (0: no limit)");
ABSL_FLAG(std::string, tls_cert, ServedDefaults().tls.cert_file,
          "PEM certificate chain for TLS on --address");
ABSL_FLAG(std::string, tls_key, ServedDefaults().tls.key_file, "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, ServedDefaults().tls.client_ca_file,
          "PEM CA certificates; when set, clients must present a certificate they signed");
ABSL_FLAG(std::string, token_file, ServedDefaults().token_file,
          "File of `tenant token` lines; when set, calls need `authorization: Bearer "
          "<token>`. Reloaded on SIGHUP");
ABSL_FLAG(int, max_message_mb, ServedDefaults().max_receive_message_bytes >> 20,
          "Largest request accepted, in MiB");
ABSL_FLAG(int, max_concurrent_rpcs, ServedDefaults().max_concurrent_rpcs,
          "RPCs handled at once; more get RESOURCE_EXHAUSTED (0: no limit)");
ABSL_FLAG(int, work_threads, ServedDefaults().work_threads,
          "Threads computing Predict and UploadTrace calls (0: one per CPU); admitted calls "
          "wait for one, up to --max_concurrent_rpcs in all");
ABSL_FLAG(double, max_request_seconds, absl::ToDoubleSeconds(ServedDefaults().max_request_time),
          "Cap on one request's handling time, on top of the client's deadline (0: none)");
ABSL_FLAG(int64_t, request_memory_mib, ServedDefaults().request_memory_bytes >> 20,
          "Memory the Predict and UploadTrace requests in flight may take once parsed, "
          "together, and the most one Predict may add while predicting; more is "
          "RESOURCE_EXHAUSTED before parsing (0: no limit)");
ABSL_FLAG(int64_t, max_trace_operations, ServedDefaults().backend.trace_limits.max_operations,
          "Most operations in one trace");
ABSL_FLAG(int64_t, max_trace_kernels_per_pass,
          ServedDefaults().backend.trace_limits.max_kernels_per_pass,
          "Most kernels in one forward or backward pass");
ABSL_FLAG(int64_t, max_trace_kernels, ServedDefaults().backend.trace_limits.max_total_kernels,
          "Most kernels and memory activities in one trace");
ABSL_FLAG(int64_t, max_trace_host_events, ServedDefaults().backend.trace_limits.max_host_events,
          "Most host events (synchronisations, waits) in one trace");
ABSL_FLAG(int64_t, max_trace_name_bytes, ServedDefaults().backend.trace_limits.max_name_bytes,
          "Longest name (operation, kernel, argument) in a trace, in bytes");
// Not a ServerOptions field: the grace Shutdown() is given.
ABSL_FLAG(int, shutdown_grace_seconds, 10,
          "On SIGTERM, how long in-flight RPCs may take before they are cancelled");
ABSL_FLAG(int, max_connections, ServedDefaults().connections.max_connections,
          "Open connections on --address; more are closed as soon as they are accepted "
          "(0: no count limit; connections are also refused when fewer than 1/8 of the "
          "file descriptor limit, 32-1024, would remain free)");
ABSL_FLAG(int, max_connections_per_peer, ServedDefaults().connections.max_connections_per_peer,
          "Open connections from one peer address on --address; more are closed as soon as "
          "they are accepted (0: no limit; use 0 behind a proxy)");
ABSL_FLAG(double, max_connection_idle_seconds,
          absl::ToDoubleSeconds(ServedDefaults().connections.max_idle),
          "Close a connection that has had no RPC for this long (0: never)");
ABSL_FLAG(double, max_connection_age_seconds,
          absl::ToDoubleSeconds(ServedDefaults().connections.max_age),
          "Close a connection after this long, +-10% (0: never)");
ABSL_FLAG(double, max_connection_age_grace_seconds,
          absl::ToDoubleSeconds(ServedDefaults().connections.max_age_grace),
          "How long the RPCs of a connection closed for its age may still run (0: no limit)");
ABSL_FLAG(double, handshake_timeout_seconds,
          absl::ToDoubleSeconds(ServedDefaults().connections.handshake_timeout),
          "Close a connection whose TLS handshake and HTTP/2 settings take longer than this");
ABSL_FLAG(double, min_client_ping_interval_seconds,
          absl::ToDoubleSeconds(ServedDefaults().connections.min_client_ping_interval),
          "Client keepalive pings more frequent than this count as strikes");
ABSL_FLAG(int, max_ping_strikes, ServedDefaults().connections.max_ping_strikes,
          "Close a connection after this many too-frequent pings (0: never)");
ABSL_FLAG(int, max_concurrent_streams, ServedDefaults().connections.max_concurrent_streams,
          "HTTP/2 streams one connection may have open at once; more are refused (0: no "
          "limit)");
ABSL_FLAG(int64_t, grpc_memory_quota_mb, ServedDefaults().connections.grpc_memory_quota_bytes >> 20,
          "Memory gRPC may take for connections and streams, per port, in MiB (0: no quota)");
ABSL_FLAG(bool, connection_guard, ServedDefaults().connections.guard,
          "Refuse connections over --max_connections or the file descriptor reserve and "
          "keep accepting through file descriptor exhaustion (off: gRPC's own accept loop, "
          "which stops for good on EMFILE)");
ABSL_FLAG(double, self_probe_seconds,
          absl::ToDoubleSeconds(ServedDefaults().connections.self_probe_interval),
          "How often to check that the --address listener accepts connections; 3 failed "
          "checks in a row turn health NOT_SERVING on both gRPC ports (0: no checks)");

namespace {

// A MiB flag in bytes, saturated rather than wrapped: an option too large
// is then refused by PredictionServer::Start, which owns the ranges.
int64_t MibToBytes(int64_t mib) {
  constexpr int64_t kMaxMib = std::numeric_limits<int64_t>::max() >> 20;
  return std::clamp(mib, -kMaxMib, kMaxMib) * (int64_t{1} << 20);
}

int MibToIntBytes(int64_t mib) {
  return static_cast<int>(std::clamp<int64_t>(MibToBytes(mib), std::numeric_limits<int>::min(),
                                              std::numeric_limits<int>::max()));
}

// NaN compares false with every bound, so it becomes a negative duration,
// which Start refuses.
absl::Duration SecondsFromFlag(double seconds) {
  return std::isnan(seconds) ? -absl::InfiniteDuration() : absl::Seconds(seconds);
}

habitat::TraceLimits TraceLimitsFromFlags() {
  habitat::TraceLimits limits;
  limits.max_operations = absl::GetFlag(FLAGS_max_trace_operations);
  limits.max_kernels_per_pass = absl::GetFlag(FLAGS_max_trace_kernels_per_pass);
  limits.max_total_kernels = absl::GetFlag(FLAGS_max_trace_kernels);
  limits.max_host_events = absl::GetFlag(FLAGS_max_trace_host_events);
  limits.max_name_bytes = absl::GetFlag(FLAGS_max_trace_name_bytes);
  return limits;
}

// The store spec from --store (default: SQLite in the state directory).
absl::StatusOr<std::string> StoreFromFlags() {
  if (absl::GetFlag(FLAGS_trace_dir).has_value()) {
    return absl::InvalidArgumentError(
        "--trace_dir is retired: pass --store=dir:PATH for the same directory store, or "
        "--store=memory");
  }
  const std::string store = absl::GetFlag(FLAGS_store);
  if (store.empty()) return "sqlite:" + habitat::DefaultSqlitePath();
  auto parsed = habitat::ParseStoreSpec(store);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--store: ", parsed.status().message()));
  }
  return store;
}

habitat::ConnectionOptions ConnectionOptionsFromFlags() {
  habitat::ConnectionOptions options;
  options.max_connections = absl::GetFlag(FLAGS_max_connections);
  options.max_connections_per_peer = absl::GetFlag(FLAGS_max_connections_per_peer);
  options.max_ping_strikes = absl::GetFlag(FLAGS_max_ping_strikes);
  options.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  options.grpc_memory_quota_bytes = MibToBytes(absl::GetFlag(FLAGS_grpc_memory_quota_mb));
  options.guard = absl::GetFlag(FLAGS_connection_guard);
  options.max_idle = SecondsFromFlag(absl::GetFlag(FLAGS_max_connection_idle_seconds));
  options.max_age = SecondsFromFlag(absl::GetFlag(FLAGS_max_connection_age_seconds));
  options.max_age_grace = SecondsFromFlag(absl::GetFlag(FLAGS_max_connection_age_grace_seconds));
  options.handshake_timeout = SecondsFromFlag(absl::GetFlag(FLAGS_handshake_timeout_seconds));
  options.min_client_ping_interval =
      SecondsFromFlag(absl::GetFlag(FLAGS_min_client_ping_interval_seconds));
  options.self_probe_interval = SecondsFromFlag(absl::GetFlag(FLAGS_self_probe_seconds));
  return options;
}

// The server's options from the flags. Refuses only what the options cannot
// hold (a retired flag, a store spec that does not parse, a negative cache
// size in an unsigned option); the ranges are PredictionServer::Start's.
absl::StatusOr<habitat::ServerOptions> ServerOptionsFromFlags() {
  habitat::ServerOptions options;
  options.address = absl::GetFlag(FLAGS_address);
  options.metrics_address = habitat::MetricsListenAddress(absl::GetFlag(FLAGS_metrics_address),
                                                          absl::GetFlag(FLAGS_address));
  options.health_address = absl::GetFlag(FLAGS_health_address);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options.token_file = absl::GetFlag(FLAGS_token_file);
  options.backend.data_dir = absl::GetFlag(FLAGS_data_dir);
  if (absl::GetFlag(FLAGS_models_dir) != "none") {
    options.backend.models_dir = absl::GetFlag(FLAGS_models_dir);
  }
  HABITAT_ASSIGN_OR_RETURN(options.store, StoreFromFlags());
  options.backend.default_catalog = absl::GetFlag(FLAGS_default_catalog);
  options.trace_retention_days = absl::GetFlag(FLAGS_trace_retention_days);
  options.tenant_quota.max_traces = absl::GetFlag(FLAGS_tenant_max_traces);
  options.tenant_quota.max_bytes = MibToBytes(absl::GetFlag(FLAGS_tenant_max_mib));
  options.backend.cache_entries =
      static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_cache_entries)));
  const int cache_mib = absl::GetFlag(FLAGS_cache_mib);
  if (cache_mib < 0) return absl::InvalidArgumentError("--cache_mib must be >= 0");
  options.backend.cache_bytes = static_cast<size_t>(cache_mib) << 20;
  options.backend.max_predict_work = absl::GetFlag(FLAGS_max_predict_work);
  options.backend.trace_limits = TraceLimitsFromFlags();
  options.max_receive_message_bytes = MibToIntBytes(absl::GetFlag(FLAGS_max_message_mb));
  options.request_memory_bytes = MibToBytes(absl::GetFlag(FLAGS_request_memory_mib));
  options.max_concurrent_rpcs = absl::GetFlag(FLAGS_max_concurrent_rpcs);
  options.work_threads = absl::GetFlag(FLAGS_work_threads);
  options.max_request_time = SecondsFromFlag(absl::GetFlag(FLAGS_max_request_seconds));
  options.connections = ConnectionOptionsFromFlags();
  return options;
}

// Each connection holds a file descriptor, and the usual soft limit (1024)
// is far below what the hard limit allows (containerd and systemd: 524288
// or more), so the soft limit is raised to the hard one, as Go programs do.
// Returns the limit now in force.
rlim_t RaiseFileDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return raised.rlim_cur;
    raised.rlim_cur = std::min<rlim_t>(limit.rlim_max, 1 << 20);  // fs.nr_open's default
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return raised.rlim_cur;
  }
  return limit.rlim_cur;
}

// Secrets that every user of the machine can read are not secret; a file
// that others can write lets them add their own token. Group read stays
// quiet: Kubernetes secret volumes give it (defaultMode 0440 with fsGroup)
// so that a non-root server can read them.
void WarnIfOthersCanAccess(const char* flag, const std::string& path) {
  struct stat info;
  if (path.empty() || ::stat(path.c_str(), &info) != 0) return;  // reading it reports errors
  const unsigned mode = info.st_mode & 0777;
  if ((mode & 027) == 0) return;
  std::fprintf(stderr, "habitat-server: warning: --%s '%s' has mode %04o: %s; chmod 600 it\n", flag,
               path.c_str(), mode,
               (mode & 022) != 0 ? "other users can write it" : "every user can read it");
}

// Where traces go and how long they stay, before the store is opened: a
// store that fails to open is then named.
void LogStoreSettings(const habitat::ServerOptions& options) {
  const auto limit = [](int64_t value, absl::string_view unit) {
    return value == 0 ? absl::StrCat("any number of ", unit) : absl::StrCat(value, " ", unit);
  };
  std::fprintf(stderr, "habitat-server: trace store %s (%s; per tenant %s and %s)\n",
               habitat::DescribeStoreSpec(options.store).c_str(),
               options.trace_retention_days == 0
                   ? "kept forever"
                   : absl::StrCat("retention ", options.trace_retention_days, " days").c_str(),
               limit(options.tenant_quota.max_traces, "traces").c_str(),
               limit(options.tenant_quota.max_bytes >> 20, "MiB").c_str());
}

void LogConnectionSettings(const habitat::ConnectionOptions& connections, rlim_t fd_limit) {
  std::fprintf(
      stderr, "habitat-server: file descriptor limit %llu; %s\n",
      static_cast<unsigned long long>(fd_limit),
      connections.max_connections == 0
          ? "no connection limit on --address"
          : absl::StrCat("at most ", connections.max_connections, " connections on --address")
                .c_str());
}

int CannotStart(const absl::Status& status) {
  std::fprintf(stderr, "habitat-server: cannot start: %s\n", std::string(status.message()).c_str());
  return 1;
}

// Blocks the handled signals in every thread; the main thread waits for
// them (ServeUntilStopped): SIGHUP reloads the catalogs and the token file,
// the others drain and stop.
sigset_t BlockHandledSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

void ReloadOnSighup(habitat::PredictionServer& server, const std::string& token_file) {
  const absl::Status catalogs = server.ReloadCatalogs();
  if (catalogs.ok()) {
    std::fprintf(stderr, "habitat-server: SIGHUP: reloaded the price catalogs\n");
  } else {
    std::fprintf(stderr, "habitat-server: SIGHUP: catalogs not reloaded, the old ones stay: %s\n",
                 std::string(catalogs.message()).c_str());
  }
  auto tokens = server.ReloadTokens();
  if (tokens.ok()) {
    std::fprintf(stderr, "habitat-server: SIGHUP: reloaded %zu tokens from %s\n", *tokens,
                 token_file.c_str());
  } else {
    std::fprintf(stderr, "habitat-server: SIGHUP: tokens not reloaded, the old ones stay: %s\n",
                 std::string(tokens.status().message()).c_str());
  }
}

// Reloads on SIGHUP until another handled signal, then drains and stops.
void ServeUntilStopped(habitat::PredictionServer& server, const sigset_t& signals,
                       const std::string& token_file) {
  int received = 0;
  while (true) {
    sigwait(&signals, &received);
    if (received != SIGHUP) break;
    ReloadOnSighup(server, token_file);
  }
  std::fprintf(stderr, "habitat-server: signal %d, draining in-flight RPCs\n", received);
  server.Shutdown(absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds)));
  server.Wait();
}

}  // namespace

int main(int argc, char** argv) {
  habitat::SetProgramFlagsUsage("habitat-server",
                                "Predicts DNN training iteration time on other GPUs.\n"
                                "  habitat-server [--address=HOST:PORT] [--store=...] [flags]");
  habitat::ParseProgramFlags(argc, argv);
  // Debian's Abseil checks every mutex acquisition for lock-order cycles, a
  // debugging aid that took 3 % of the server's CPU on the warm path
  // (docs/benchmarks.md, "Warm path"); tests keep it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const sigset_t signals = BlockHandledSignals();

  auto options = ServerOptionsFromFlags();
  if (!options.ok()) return CannotStart(options.status());
  WarnIfOthersCanAccess("token_file", options->token_file);
  WarnIfOthersCanAccess("tls_key", options->tls.key_file);
  LogStoreSettings(*options);
  LogConnectionSettings(options->connections, RaiseFileDescriptorLimit());
  auto server = habitat::PredictionServer::Start(*options);
  if (!server.ok()) return CannotStart(server.status());
  std::fprintf(stderr,
               "habitat-server: serving on port %d (%s, %s; metrics on port %d; "
               "health-only port %d)\n",
               (*server)->port(), options->tls.enabled() ? "TLS" : "plaintext",
               options->token_file.empty() ? "no authentication" : "bearer tokens",
               (*server)->metrics_port(), (*server)->health_port());
  ServeUntilStopped(**server, signals, options->token_file);
  std::fprintf(stderr, "habitat-server: stopped\n");
  return 0;
}
