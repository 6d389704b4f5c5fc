// habitat-server: the prediction service.
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iterator>
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
#include "server/listen_address.h"
#include "server/prediction_server.h"
#include "store/trace_store_factory.h"

ABSL_FLAG(std::string, address, "0.0.0.0:50051", "gRPC listen address (host:port)");
ABSL_FLAG(std::string, metrics_address, ":9464",
          "Prometheus /metrics listen address (plain HTTP, no authentication); a bare :PORT "
          "listens on the host of --address; empty disables it");
ABSL_FLAG(std::string, health_address, "",
          "Plaintext listen address serving only grpc.health.v1 (for probes that cannot "
          "speak TLS); empty disables it");
// Defaults: the source tree's data/ and models/ when run from the build
// tree, else the installed ones beside the program (common/resource_dirs.h).
ABSL_FLAG(std::string, data_dir,
          habitat::DefaultResourceDir(HABITAT_BUILD_OUTPUT_DIR, HABITAT_SOURCE_DATA_DIR,
                                      HABITAT_INSTALLED_DATA_DIR),
          "Directory with devices.textproto and catalogs/");
ABSL_FLAG(std::string, models_dir,
          habitat::DefaultResourceDir(HABITAT_BUILD_OUTPUT_DIR, HABITAT_SOURCE_MODELS_DIR,
                                      HABITAT_INSTALLED_MODELS_DIR),
          "Directory with kernel_varying/ (the trained predictor for convolutions, matrix "
          "multiplies, LSTMs and attention); a missing or damaged model stops start-up. "
          "'none' runs without it (those ops are then carried over unscaled)");
ABSL_FLAG(std::string, store, "",
          "Where uploaded traces are stored: sqlite:PATH, postgres:CONNINFO or a "
          "postgresql:// URI (for replicas sharing one store), dir:PATH, or memory. "
          "Default: sqlite:$STATE_DIRECTORY/traces.db, else "
          "$XDG_STATE_HOME/habitat/traces.db, else ~/.local/state/habitat/traces.db");
ABSL_FLAG(std::optional<std::string>, trace_dir, std::nullopt,
          "Retired: use --store=dir:PATH (or --store=memory); the server refuses to start "
          "when it is given, rather than keep traces somewhere else than before");
ABSL_FLAG(std::string, default_catalog, "",
          "The price catalog for requests that name none: a catalog in <data_dir>/catalogs, "
          "or 'none' for no prices unless asked. Default: aws when present, else none");
ABSL_FLAG(int, trace_retention_days, 0,
          "Delete traces stored more than this many days ago, at start-up and hourly "
          "(0: keep forever)");
ABSL_FLAG(int64_t, tenant_max_traces, habitat::TenantQuota{}.max_traces,
          "Most traces one tenant may keep in the store; uploads beyond are refused with "
          "RESOURCE_EXHAUSTED (0: no limit)");
ABSL_FLAG(int64_t, tenant_max_mib, habitat::TenantQuota{}.max_bytes >> 20,
          "Most MiB of traces (serialised size) one tenant may keep in the store (0: no limit)");
ABSL_FLAG(int, cache_entries, 4096, "Memoised (trace, device) predictions kept");
ABSL_FLAG(int, cache_mib, static_cast<int>(habitat::kDefaultPredictionCacheBytes >> 20),
          "Memory the memoised predictions may take, in MiB (0: no cache)");
ABSL_FLAG(int64_t, max_predict_work, habitat::kDefaultMaxPredictWork,
          "Most work one Predict may start: trace entries (operations, kernels, memory "
          "activities, host events) times GPUs not in the cache; more is refused with "
          "RESOURCE_EXHAUSTED before any work (0: no limit)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain for TLS on --address");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificates; when set, clients must present a certificate they signed");
ABSL_FLAG(std::string, token_file, "",
          "File of `tenant token` lines; when set, calls need `authorization: Bearer "
          "<token>`. Reloaded on SIGHUP");
ABSL_FLAG(int, max_message_mb, 64, "Largest request accepted, in MiB");
ABSL_FLAG(int, max_concurrent_rpcs, 64,
          "RPCs handled at once; more get RESOURCE_EXHAUSTED (0: no limit)");
ABSL_FLAG(int, work_threads, 0,
          "Threads computing Predict and UploadTrace calls (0: one per CPU); admitted calls "
          "wait for one, up to --max_concurrent_rpcs in all");
ABSL_FLAG(double, max_request_seconds, 30,
          "Cap on one request's handling time, on top of the client's deadline (0: none)");
ABSL_FLAG(int64_t, request_memory_mib, habitat::kDefaultRequestMemoryBytes >> 20,
          "Memory the Predict and UploadTrace requests in flight may take once parsed, "
          "together, and the most one Predict may add while predicting; more is "
          "RESOURCE_EXHAUSTED before parsing (0: no limit)");
ABSL_FLAG(int64_t, max_trace_operations, habitat::TraceLimits().max_operations,
          "Most operations in one trace");
ABSL_FLAG(int64_t, max_trace_kernels_per_pass, habitat::TraceLimits().max_kernels_per_pass,
          "Most kernels in one forward or backward pass");
ABSL_FLAG(int64_t, max_trace_kernels, habitat::TraceLimits().max_total_kernels,
          "Most kernels and memory activities in one trace");
ABSL_FLAG(int64_t, max_trace_host_events, habitat::TraceLimits().max_host_events,
          "Most host events (synchronisations, waits) in one trace");
ABSL_FLAG(int64_t, max_trace_name_bytes, habitat::TraceLimits().max_name_bytes,
          "Longest name (operation, kernel, argument) in a trace, in bytes");
ABSL_FLAG(int, shutdown_grace_seconds, 10,
          "On SIGTERM, how long in-flight RPCs may take before they are cancelled");
ABSL_FLAG(int, max_connections, habitat::ConnectionOptions().max_connections,
          "Open connections on --address; more are closed as soon as they are accepted "
          "(0: no count limit; connections are also refused when fewer than 1/8 of the "
          "file descriptor limit, 32-1024, would remain free)");
ABSL_FLAG(int, max_connections_per_peer, habitat::ConnectionOptions().max_connections_per_peer,
          "Open connections from one peer address on --address; more are closed as soon as "
          "they are accepted (0: no limit; use 0 behind a proxy)");
ABSL_FLAG(double, max_connection_idle_seconds,
          absl::ToDoubleSeconds(habitat::ConnectionOptions().max_idle),
          "Close a connection that has had no RPC for this long (0: never)");
ABSL_FLAG(double, max_connection_age_seconds,
          absl::ToDoubleSeconds(habitat::ConnectionOptions().max_age),
          "Close a connection after this long, +-10% (0: never)");
ABSL_FLAG(double, max_connection_age_grace_seconds,
          absl::ToDoubleSeconds(habitat::ConnectionOptions().max_age_grace),
          "How long the RPCs of a connection closed for its age may still run (0: no limit)");
ABSL_FLAG(double, handshake_timeout_seconds,
          absl::ToDoubleSeconds(habitat::ConnectionOptions().handshake_timeout),
          "Close a connection whose TLS handshake and HTTP/2 settings take longer than this");
ABSL_FLAG(double, min_client_ping_interval_seconds,
          absl::ToDoubleSeconds(habitat::ConnectionOptions().min_client_ping_interval),
          "Client keepalive pings more frequent than this count as strikes");
ABSL_FLAG(int, max_ping_strikes, habitat::ConnectionOptions().max_ping_strikes,
          "Close a connection after this many too-frequent pings (0: never)");
ABSL_FLAG(int, max_concurrent_streams, habitat::ConnectionOptions().max_concurrent_streams,
          "HTTP/2 streams one connection may have open at once; more are refused (0: no "
          "limit)");
ABSL_FLAG(int64_t, grpc_memory_quota_mb, habitat::ConnectionOptions().grpc_memory_quota_bytes >> 20,
          "Memory gRPC may take for connections and streams, per port, in MiB (0: no quota)");
ABSL_FLAG(bool, connection_guard, habitat::ConnectionOptions().guard,
          "Refuse connections over --max_connections or the file descriptor reserve and "
          "keep accepting through file descriptor exhaustion (off: gRPC's own accept loop, "
          "which stops for good on EMFILE)");
ABSL_FLAG(double, self_probe_seconds,
          absl::ToDoubleSeconds(habitat::ConnectionOptions().self_probe_interval),
          "How often to check that the --address listener accepts connections; 3 failed "
          "checks in a row turn health NOT_SERVING on both gRPC ports (0: no checks)");

namespace {

absl::StatusOr<habitat::TraceLimits> TraceLimitsFromFlags() {
  habitat::TraceLimits limits;
  limits.max_operations = absl::GetFlag(FLAGS_max_trace_operations);
  limits.max_kernels_per_pass = absl::GetFlag(FLAGS_max_trace_kernels_per_pass);
  limits.max_total_kernels = absl::GetFlag(FLAGS_max_trace_kernels);
  limits.max_host_events = absl::GetFlag(FLAGS_max_trace_host_events);
  limits.max_name_bytes = absl::GetFlag(FLAGS_max_trace_name_bytes);
  const std::pair<const char*, int64_t> checks[] = {
      {"max_trace_host_events", limits.max_host_events},
      {"max_trace_operations", limits.max_operations},
      {"max_trace_kernels_per_pass", limits.max_kernels_per_pass},
      {"max_trace_kernels", limits.max_total_kernels},
      {"max_trace_name_bytes", limits.max_name_bytes}};
  for (const auto& [flag, value] : checks) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " must be >= 1 (got ", value, ")"));
    }
  }
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

absl::StatusOr<habitat::ConnectionOptions> ConnectionOptionsFromFlags() {
  habitat::ConnectionOptions options;
  options.max_connections = absl::GetFlag(FLAGS_max_connections);
  options.max_connections_per_peer = absl::GetFlag(FLAGS_max_connections_per_peer);
  options.max_ping_strikes = absl::GetFlag(FLAGS_max_ping_strikes);
  options.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  const int64_t quota_mb = absl::GetFlag(FLAGS_grpc_memory_quota_mb);
  if (quota_mb < 0 || quota_mb > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError("--grpc_memory_quota_mb must be 0..2^30");
  }
  options.grpc_memory_quota_bytes = quota_mb << 20;
  options.guard = absl::GetFlag(FLAGS_connection_guard);
  const std::pair<const char*, absl::Duration*> durations[] = {
      {"max_connection_idle_seconds", &options.max_idle},
      {"max_connection_age_seconds", &options.max_age},
      {"max_connection_age_grace_seconds", &options.max_age_grace},
      {"handshake_timeout_seconds", &options.handshake_timeout},
      {"min_client_ping_interval_seconds", &options.min_client_ping_interval},
      {"self_probe_seconds", &options.self_probe_interval}};
  const double values[] = {absl::GetFlag(FLAGS_max_connection_idle_seconds),
                           absl::GetFlag(FLAGS_max_connection_age_seconds),
                           absl::GetFlag(FLAGS_max_connection_age_grace_seconds),
                           absl::GetFlag(FLAGS_handshake_timeout_seconds),
                           absl::GetFlag(FLAGS_min_client_ping_interval_seconds),
                           absl::GetFlag(FLAGS_self_probe_seconds)};
  for (size_t i = 0; i < std::size(values); ++i) {
    if (!(values[i] >= 0) || values[i] > 1e9) {  // also NaN
      return absl::InvalidArgumentError(
          absl::StrCat("--", durations[i].first, " must be 0..1e9 seconds"));
    }
    *durations[i].second = absl::Seconds(values[i]);
  }
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

  // Block the handled signals in every thread; the main thread waits for
  // them below: SIGHUP reloads the catalogs and the token file, the others
  // drain and stop.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  habitat::ServerOptions options;
  options.address = absl::GetFlag(FLAGS_address);
  options.metrics_address = habitat::MetricsListenAddress(absl::GetFlag(FLAGS_metrics_address),
                                                          absl::GetFlag(FLAGS_address));
  options.health_address = absl::GetFlag(FLAGS_health_address);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options.token_file = absl::GetFlag(FLAGS_token_file);
  WarnIfOthersCanAccess("token_file", options.token_file);
  WarnIfOthersCanAccess("tls_key", options.tls.key_file);
  options.backend.data_dir = absl::GetFlag(FLAGS_data_dir);
  if (absl::GetFlag(FLAGS_models_dir) != "none") {
    options.backend.models_dir = absl::GetFlag(FLAGS_models_dir);
  }
  auto store = StoreFromFlags();
  if (!store.ok()) {
    std::fprintf(stderr, "habitat-server: cannot start: %s\n",
                 std::string(store.status().message()).c_str());
    return 1;
  }
  options.store = *store;
  options.backend.default_catalog = absl::GetFlag(FLAGS_default_catalog);
  options.trace_retention_days = absl::GetFlag(FLAGS_trace_retention_days);
  if (options.trace_retention_days < 0) {
    std::fprintf(stderr, "habitat-server: cannot start: --trace_retention_days must be >= 0\n");
    return 1;
  }
  options.tenant_quota.max_traces = absl::GetFlag(FLAGS_tenant_max_traces);
  const int64_t tenant_mib = absl::GetFlag(FLAGS_tenant_max_mib);
  if (options.tenant_quota.max_traces < 0 || tenant_mib < 0 || tenant_mib > (int64_t{1} << 40)) {
    std::fprintf(stderr,
                 "habitat-server: cannot start: --tenant_max_traces and --tenant_max_mib must be "
                 ">= 0 (and --tenant_max_mib at most 2^40)\n");
    return 1;
  }
  options.tenant_quota.max_bytes = tenant_mib << 20;
  const auto limit = [](int64_t value, absl::string_view unit) {
    return value == 0 ? absl::StrCat("any number of ", unit) : absl::StrCat(value, " ", unit);
  };
  std::fprintf(stderr, "habitat-server: trace store %s (%s; per tenant %s and %s)\n",
               habitat::DescribeStoreSpec(*store).c_str(),
               options.trace_retention_days == 0
                   ? "kept forever"
                   : absl::StrCat("retention ", options.trace_retention_days, " days").c_str(),
               limit(options.tenant_quota.max_traces, "traces").c_str(),
               limit(tenant_mib, "MiB").c_str());
  options.backend.cache_entries =
      static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_cache_entries)));
  const int cache_mib = absl::GetFlag(FLAGS_cache_mib);
  const int64_t max_work = absl::GetFlag(FLAGS_max_predict_work);
  if (cache_mib < 0 || max_work < 0) {
    std::fprintf(stderr,
                 "habitat-server: cannot start: --cache_mib and --max_predict_work must be >= 0\n");
    return 1;
  }
  options.backend.cache_bytes = static_cast<size_t>(cache_mib) << 20;
  options.backend.max_predict_work = max_work;
  const int message_mb = absl::GetFlag(FLAGS_max_message_mb);
  if (message_mb < 1 || message_mb > 2047) {
    std::fprintf(stderr, "habitat-server: cannot start: --max_message_mb must be 1..2047\n");
    return 1;
  }
  options.max_receive_message_bytes = message_mb << 20;
  const int64_t request_memory_mib = absl::GetFlag(FLAGS_request_memory_mib);
  if (request_memory_mib < 0 || request_memory_mib > (int64_t{1} << 30)) {
    std::fprintf(stderr, "habitat-server: cannot start: --request_memory_mib must be 0..2^30\n");
    return 1;
  }
  options.request_memory_bytes = request_memory_mib << 20;
  options.max_concurrent_rpcs = absl::GetFlag(FLAGS_max_concurrent_rpcs);
  options.work_threads = absl::GetFlag(FLAGS_work_threads);
  if (options.work_threads < 0) {
    std::fprintf(stderr, "habitat-server: cannot start: --work_threads must be >= 0\n");
    return 1;
  }
  const double request_seconds = absl::GetFlag(FLAGS_max_request_seconds);
  if (!(request_seconds >= 0)) {  // also NaN
    std::fprintf(stderr, "habitat-server: cannot start: --max_request_seconds must be >= 0\n");
    return 1;
  }
  options.max_request_time = absl::Seconds(request_seconds);
  auto limits = TraceLimitsFromFlags();
  if (!limits.ok()) {
    std::fprintf(stderr, "habitat-server: cannot start: %s\n",
                 std::string(limits.status().message()).c_str());
    return 1;
  }
  options.backend.trace_limits = *limits;
  auto connections = ConnectionOptionsFromFlags();
  if (!connections.ok()) {
    std::fprintf(stderr, "habitat-server: cannot start: %s\n",
                 std::string(connections.status().message()).c_str());
    return 1;
  }
  options.connections = *connections;
  const rlim_t fd_limit = RaiseFileDescriptorLimit();
  std::fprintf(stderr, "habitat-server: file descriptor limit %llu; %s\n",
               static_cast<unsigned long long>(fd_limit),
               options.connections.max_connections == 0
                   ? "no connection limit on --address"
                   : absl::StrCat("at most ", options.connections.max_connections,
                                  " connections on --address")
                         .c_str());

  auto server = habitat::PredictionServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "habitat-server: cannot start: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::fprintf(stderr,
               "habitat-server: serving on port %d (%s, %s; metrics on port %d; "
               "health-only port %d)\n",
               (*server)->port(), options.tls.enabled() ? "TLS" : "plaintext",
               options.token_file.empty() ? "no authentication" : "bearer tokens",
               (*server)->metrics_port(), (*server)->health_port());

  int received = 0;
  while (true) {
    sigwait(&signals, &received);
    if (received != SIGHUP) break;
    const absl::Status catalogs = (*server)->ReloadCatalogs();
    if (catalogs.ok()) {
      std::fprintf(stderr, "habitat-server: SIGHUP: reloaded the price catalogs\n");
    } else {
      std::fprintf(stderr, "habitat-server: SIGHUP: catalogs not reloaded, the old ones stay: %s\n",
                   std::string(catalogs.message()).c_str());
    }
    auto tokens = (*server)->ReloadTokens();
    if (tokens.ok()) {
      std::fprintf(stderr, "habitat-server: SIGHUP: reloaded %zu tokens from %s\n", *tokens,
                   options.token_file.c_str());
    } else {
      std::fprintf(stderr, "habitat-server: SIGHUP: tokens not reloaded, the old ones stay: %s\n",
                   std::string(tokens.status().message()).c_str());
    }
  }
  std::fprintf(stderr, "habitat-server: signal %d, draining in-flight RPCs\n", received);
  (*server)->Shutdown(absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds)));
  (*server)->Wait();
  std::fprintf(stderr, "habitat-server: stopped\n");
  return 0;
}
