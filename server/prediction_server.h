// A running prediction server: the gRPC service with health and reflection
// (plaintext or TLS), an optional plaintext health-only port for probes, and
// a Prometheus endpoint on its own port. Move-only handle; destroying it
// shuts the server down.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/backend/prediction_backend.h"
#include "core/store/trace_store.h"
#include "server/tls_credentials.h"

namespace habitat {

// Limits on the connections of the gRPC ports. gRPC keeps a connection
// (one file descriptor, ~20 KiB) for as long as the client does; these
// bound how many, for how long, and how often a client may ping.
struct ConnectionOptions {
  // Open connections on `address`; more are closed as soon as they are
  // accepted. 0: no count limit (the file descriptor reserve still holds).
  int max_connections = 4096;
  // Open connections from one peer address on `address`, so that one client
  // cannot hold every slot (docs/operations.md, "Per-peer limits"). 0: no
  // per-peer limit; use it behind a proxy, where every client has the
  // proxy's address.
  int max_connections_per_peer = 64;
  // A connection without RPCs for this long is closed (GOAWAY); zero: never.
  absl::Duration max_idle = absl::Seconds(120);
  // A connection is closed after this long (gRPC adds +-10% jitter), its
  // RPCs given `max_age_grace` to finish; zero: never.
  absl::Duration max_age = absl::Minutes(30);
  absl::Duration max_age_grace = absl::Minutes(2);
  // From accept until the TLS handshake and the client's HTTP/2 settings
  // are done; a connection that takes longer is closed.
  absl::Duration handshake_timeout = absl::Seconds(10);
  // Pings a client may send this often without data; each one sent sooner
  // is a strike, and after `max_ping_strikes` the connection is closed
  // (0: never).
  absl::Duration min_client_ping_interval = absl::Seconds(30);
  int max_ping_strikes = 2;
  // HTTP/2 streams one connection may have open at once, advertised in
  // SETTINGS_MAX_CONCURRENT_STREAMS; a client opening more has them
  // refused. gRPC 1.51 sets no limit: streams opened and never used (no
  // token needed) each held about 11.5 KB, 2-4 GB from one connection in
  // seconds (docs/operations.md, "Per-peer limits"). 0: no limit.
  int max_concurrent_streams = 100;
  // Memory gRPC itself may take for connections and streams, per port
  // (grpc::ResourceQuota): under pressure it shrinks read buffers and
  // refuses new streams instead of growing. 0: no quota. A request's own
  // message (--max_message_mb) must fit well inside it.
  int64_t grpc_memory_quota_bytes = int64_t{512} << 20;
  // Sheds connections over max_connections or beyond the file descriptor
  // reserve and keeps the listeners accepting through descriptor exhaustion
  // (server/connection_guard.h). Off: gRPC's own accept loop, which stops
  // for good on EMFILE.
  bool guard = true;
  // How often the server checks that its listener on `address` still
  // accepts connections; after 3 failed checks in a row health turns
  // NOT_SERVING on both gRPC ports until a check passes. Zero: no checks.
  absl::Duration self_probe_interval = absl::Seconds(5);
};

// The default of ServerOptions::request_memory_bytes (docs/operations.md,
// "Memory budget").
inline constexpr int64_t kDefaultRequestMemoryBytes = int64_t{256} << 20;

struct ServerOptions {
  // host:port; port 0 picks a free port (see PredictionServer::port()).
  std::string address = "0.0.0.0:50051";
  // host:port for /metrics (plain HTTP); empty disables the endpoint.
  std::string metrics_address;
  // host:port of a plaintext port serving only grpc.health.v1, for probes
  // that cannot speak TLS (Kubernetes gRPC probes); empty disables it.
  std::string health_address;
  // Empty: plaintext gRPC.
  TlsOptions tls;
  // `tenant token` lines; empty turns authentication off (one anonymous
  // tenant).
  std::string token_file;
  BackendOptions backend;
  // Where uploaded traces are kept: a --store spec
  // (server/persistence/trace_store_factory.h). Empty: memory.
  std::string store;
  // How much each tenant may keep in the store.
  TenantQuota tenant_quota;
  // Traces older than this many days are deleted at start-up and every
  // hour; 0 keeps them forever.
  int trace_retention_days = 0;
  // How often retention sweeps after the start-up one (tests shorten it).
  absl::Duration trace_retention_interval = absl::Hours(1);
  // Largest request accepted; larger ones get RESOURCE_EXHAUSTED.
  int max_receive_message_bytes = 64 << 20;
  // RPCs handled at once; more get RESOURCE_EXHAUSTED. 0: no limit.
  int max_concurrent_rpcs = 0;
  // Cap on one request's handling time; zero: the client's deadline only.
  absl::Duration max_request_time = absl::ZeroDuration();
  // Memory the requests in flight may take once parsed, together
  // (RequestMemory); also the most one Predict may add while predicting
  // (BackendOptions::max_request_memory_bytes). 0: no limit.
  int64_t request_memory_bytes = kDefaultRequestMemoryBytes;
  // Threads computing Predict and UploadTrace calls; 0: one per CPU.
  int work_threads = 0;
  // How often habitat_stored_traces is re-read from the store, so that it
  // follows retention sweeps and other replicas' uploads, not only this
  // server's uploads. Must be positive.
  absl::Duration stored_traces_refresh = absl::Seconds(5);
  ConnectionOptions connections;
};

class PredictionServer {
 public:
  // Errors name the flag or file at fault (an option out of range, checked
  // first by CheckServerOptions in server/server_options_check.h; bad TLS
  // file, bad token file, port in use, bad data directory).
  static absl::StatusOr<std::unique_ptr<PredictionServer>> Start(const ServerOptions& options);
  ~PredictionServer();

  PredictionServer(const PredictionServer&) = delete;
  PredictionServer& operator=(const PredictionServer&) = delete;

  int port() const;
  // 0 when metrics are disabled.
  int metrics_port() const;
  // 0 when there is no separate health port.
  int health_port() const;

  // Re-reads the token file (SIGHUP). On error the old tokens stay in force
  // and the status says why; FAILED_PRECONDITION when auth is off. Returns
  // the number of tokens now loaded.
  absl::StatusOr<size_t> ReloadTokens();
  // Re-reads the price catalogs (SIGHUP); on error the old ones stay in
  // force and the status says why.
  absl::Status ReloadCatalogs();

  // Stops accepting RPCs, marks health NOT_SERVING and waits up to `grace`
  // for in-flight RPCs before cancelling them.
  void Shutdown(absl::Duration grace);
  // Blocks until the server has shut down.
  void Wait();

 private:
  class Impl;
  explicit PredictionServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace habitat
