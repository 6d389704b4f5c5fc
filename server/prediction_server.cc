#include "server/prediction_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "server/connection_guard.h"
#include "server/persistence/trace_retention.h"
#include "server/persistence/trace_store_factory.h"
#include "server/prediction_service.h"
#include "server/process_metrics.h"
#include "server/server_metrics.h"
#include "server/server_options_check.h"
#include "server/token_auth.h"
#include "server/watch_token_check.h"
#include "server/work_queue.h"

namespace habitat {
namespace {

constexpr char kReflectionPlugin[] = "proto_server_reflection";
// /metrics: civetweb holds a worker per connection until its request is
// read, so open connections are capped at the workers (none waits for
// one), one peer may hold only a few of them (32 half-open connections
// that reconnected when closed stalled every scrape), and a read timeout
// well inside Prometheus's scrape timeout (10 s) frees them.
constexpr int kMetricsThreads = 16;
constexpr int kMetricsConnectionsPerPeer = 4;
constexpr absl::Duration kMetricsRequestTimeout = absl::Seconds(5);

// Reflection per server instead of the process-wide plugin, so the health
// port can go without it: with `enabled` false any reflection plugin is
// removed, with true exactly one is present.
class ReflectionOption : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool enabled) : enabled_(enabled) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    bool present = false;
    for (auto it = plugins->begin(); it != plugins->end();) {
      if ((*it)->name() == kReflectionPlugin && (!enabled_ || present)) {
        it = plugins->erase(it);
        continue;
      }
      present = present || (*it)->name() == kReflectionPlugin;
      ++it;
    }
    if (enabled_ && !present) {
      plugins->push_back(std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>());
    }
  }

 private:
  bool enabled_;
};

// The health-only port serves probes, which open a connection or two at a
// time: a flood there stops here, not at the main port's limit.
constexpr int kHealthPortMaxConnections = 64;
// A probe opens one connection at a time; idle connections from one peer
// beyond this cannot starve the others' checks.
constexpr int kHealthPortMaxConnectionsPerPeer = 8;
// Self-probes that must fail in a row before health turns NOT_SERVING, and
// how long one may take.
constexpr int kSelfProbeFailures = 3;
constexpr absl::Duration kSelfProbeTimeout = absl::Seconds(2);
// The first probe, right after start, also proves that the connection guard
// is in place; a loaded machine gets more time.
constexpr absl::Duration kStartProbeTimeout = absl::Seconds(10);

int ChannelArgMillis(absl::Duration duration) {
  if (duration == absl::ZeroDuration() || duration >= absl::Milliseconds(INT_MAX)) return INT_MAX;
  return static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(duration)));
}

void AddConnectionLimits(const ConnectionOptions& options, grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ChannelArgMillis(options.max_idle));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, ChannelArgMillis(options.max_age));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                             ChannelArgMillis(options.max_age_grace));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             ChannelArgMillis(options.handshake_timeout));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             ChannelArgMillis(options.min_client_ping_interval));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, options.max_ping_strikes);
  if (options.max_concurrent_streams > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  }
  if (options.grpc_memory_quota_bytes > 0) {
    // The builder keeps its own reference to the quota.
    grpc::ResourceQuota quota("habitat-grpc");
    quota.Resize(static_cast<size_t>(options.grpc_memory_quota_bytes));
    builder.SetResourceQuota(quota);
  }
}

// gRPC 1.51 checks --max_message_mb against a request's compressed size
// and then inflates it in full, before any handler or token check: 1 MB of
// gzip became 1 GiB of memory. Requests are never compressed by this
// project's clients, so compressed ones are refused: with only identity
// enabled, a call that says grpc-encoding: gzip (or deflate) ends in
// UNIMPLEMENTED ("Compression algorithm 'gzip' is disabled") and
// clients are told, in grpc-accept-encoding, to send identity. With
// decompression off as well, no message is ever inflated, whatever reaches
// the filter.
void RefuseCompressedRequests(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET,
                             1 << GRPC_COMPRESS_NONE);
  builder.AddChannelArgument(GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, 0);
}

// gRPC sets SO_REUSEPORT by default: a second server started on the same
// address would then start too and the kernel would split connections
// between the two (uploads to one, Predict by id on the other: NOT_FOUND).
void ListenExclusively(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

// Descriptors kept free of connections: for the store, /metrics, the
// health port and self-probes while the main port is flooded.
int FdReserve() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1024;
  return static_cast<int>(std::clamp<rlim_t>(limit.rlim_cur / 8, 32, 1024));
}

// The store named by options.store, with the tenant quota.
absl::StatusOr<std::unique_ptr<TraceStore>> OpenStore(const ServerOptions& options) {
  TraceStoreOptions store_options;
  store_options.quota = options.tenant_quota;
  return OpenTraceStore(options.store.empty() ? "memory" : options.store, std::move(store_options));
}

// Without a token file, one anonymous tenant.
absl::StatusOr<std::unique_ptr<Authenticator>> LoadAuthenticator(const std::string& token_file) {
  if (token_file.empty()) return std::make_unique<Authenticator>();
  return Authenticator::FromTokenFile(token_file);
}

}  // namespace

class PredictionServer::Impl {
 public:
  std::unique_ptr<PredictionBackend> backend;
  // Declared after the backend, whose store it sweeps: destroyed (its
  // thread stopped) first. Null when traces are kept forever.
  std::unique_ptr<TraceRetention> retention;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<ServerMetrics> metrics;
  std::shared_ptr<ProcessMetrics> process_metrics =
      std::make_shared<ProcessMetrics>(HABITAT_VERSION, HABITAT_REVISION);
  std::unique_ptr<prometheus::Exposer> exposer;
  std::unique_ptr<Authenticator> authenticator;
  // Declared before the service and the server: destroyed after them, once
  // every call has finished.
  std::unique_ptr<WorkQueue> work;
  std::unique_ptr<PredictionServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  // Answers every method but health on the health port with UNIMPLEMENTED.
  // gRPC adds the default health service only at start, and a builder with
  // no callback service refuses to build ("no frequently polled queue").
  // Declared before the server that uses it, so it is destroyed after.
  grpc::CallbackGenericService health_port_fallback;
  // Health only, plaintext; null without health_address.
  std::unique_ptr<grpc::Server> health_server;
  int port = 0;
  int metrics_port = 0;
  int health_port = 0;
  bool shut_down = false;
  // Ports registered with the connection guard, released at destruction.
  std::vector<int> guarded_ports;

  // Re-reads the store's trace count into habitat_stored_traces. On a
  // thread of its own rather than at scrape time: a store that hangs (a
  // PostgreSQL server gone) must not hang /metrics; the gauge then keeps
  // the last count read.
  absl::Mutex refresh_mutex;
  bool stop_refresh ABSL_GUARDED_BY(refresh_mutex) = false;
  std::thread refresher;

  // Health is SERVING while the server is not draining and its listener
  // on the main port accepts connections (the self-probe's verdict).
  absl::Mutex health_mutex;
  bool draining ABSL_GUARDED_BY(health_mutex) = false;
  bool listener_accepts ABSL_GUARDED_BY(health_mutex) = true;
  bool stop_probe ABSL_GUARDED_BY(health_mutex) = false;
  std::thread prober;

  ~Impl() {
    StopProber();
    StopRefresher();
    for (int guarded : guarded_ports) ConnectionGuard::Get().Release(guarded);
  }

  // Serves /metrics on `address`, its connections limited by the guard
  // (`shed`: see PortGuard::shed).
  absl::Status ServeMetrics(const std::string& address, bool shed) {
    try {
      // civetweb's defaults (2 threads, 30 s) let two half-open connections
      // stall every scrape for 30 s.
      exposer = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
          "listening_ports", address, "num_threads", std::to_string(kMetricsThreads),
          "request_timeout_ms", std::to_string(absl::ToInt64Milliseconds(kMetricsRequestTimeout))});
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve metrics on '", address, "': ", e.what()));
    }
    exposer->RegisterCollectable(registry);
    exposer->RegisterCollectable(process_metrics);
    auto ports = exposer->GetListeningPorts();
    metrics_port = ports.empty() ? 0 : ports.front();
    if (metrics_port > 0) {
      PortGuard guard;
      guard.max_connections = kMetricsThreads;
      guard.max_connections_per_peer = kMetricsConnectionsPerPeer;
      guard.fd_reserve = FdReserve() / 2;
      guard.shed = shed;
      ConnectionGuard::Get().Guard(metrics_port, guard);
      guarded_ports.push_back(metrics_port);
    }
    return absl::OkStatus();
  }

  // The store, the backend on it and, when traces expire, the retention
  // sweeps.
  absl::Status OpenBackend(const ServerOptions& options) {
    HABITAT_ASSIGN_OR_RETURN(std::unique_ptr<TraceStore> store, OpenStore(options));
    // The transport's limits are the backend's: a breakdown gRPC would not
    // send is refused before it is computed.
    BackendOptions backend_options = options.backend;
    backend_options.max_response_bytes = options.max_receive_message_bytes;
    backend_options.max_request_memory_bytes = options.request_memory_bytes;
    HABITAT_ASSIGN_OR_RETURN(backend, PredictionBackend::Create(backend_options, std::move(store)));
    if (options.trace_retention_days > 0) {
      RetentionOptions retention_options;
      retention_options.days = options.trace_retention_days;
      retention_options.interval = options.trace_retention_interval;
      HABITAT_ASSIGN_OR_RETURN(retention,
                               TraceRetention::Start(&backend->store(), retention_options));
    }
    return absl::OkStatus();
  }

  // The metrics, their stored-traces refresher and, when asked, /metrics.
  absl::Status StartMetrics(const ServerOptions& options) {
    std::vector<std::string> device_ids;
    for (const auto& device : backend->devices().devices()) device_ids.push_back(device.id());
    metrics = std::make_unique<ServerMetrics>(*registry, device_ids, options.max_request_time);
    metrics->SetDevicesLoaded(static_cast<double>(backend->devices().devices().size()));
    const size_t stored = backend->stored_traces();
    metrics->SetStoredTraces(static_cast<double>(stored));
    // An operator who finds the count at zero after a restart knows at once
    // that the store is not the one they expected.
    std::fprintf(stderr, "habitat-server: the trace store holds %zu traces\n", stored);
    StartRefresher(options.stored_traces_refresh);
    if (options.metrics_address.empty()) return absl::OkStatus();
    return ServeMetrics(options.metrics_address, options.connections.guard);
  }

  void CreateService(const ServerOptions& options) {
    ServiceLimits limits;
    limits.max_concurrent_rpcs = options.max_concurrent_rpcs;
    limits.max_request_time = options.max_request_time;
    limits.request_memory_bytes = options.request_memory_bytes;
    const int threads = options.work_threads > 0
                            ? options.work_threads
                            : static_cast<int>(std::thread::hardware_concurrency());
    // With tenants, one worker is always left to the others.
    work = std::make_unique<WorkQueue>(threads,
                                       options.token_file.empty() ? 0 : std::max(1, threads - 1));
    service = std::make_unique<PredictionServiceImpl>(backend.get(), metrics.get(),
                                                      authenticator.get(), work.get(), limits);
  }

  // The plaintext health-only port, when options.health_address asks for
  // one; NOT_SERVING until start-up is done.
  absl::Status StartHealthPort(const ServerOptions& options) {
    if (options.health_address.empty()) return absl::OkStatus();
    grpc::ServerBuilder builder;
    builder.SetOption(std::make_unique<ReflectionOption>(false));
    builder.RegisterCallbackGenericService(&health_port_fallback);
    AddConnectionLimits(options.connections, builder);
    RefuseCompressedRequests(builder);
    ListenExclusively(builder);
    builder.AddListeningPort(options.health_address, grpc::InsecureServerCredentials(),
                             &health_port);
    health_server = builder.BuildAndStart();
    if (health_server == nullptr || health_port == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on --health_address '",
                                                 options.health_address,
                                                 "' (in use or not an address?)"));
    }
    health_server->GetHealthCheckService()->SetServingStatus(false);
    PortGuard guard;
    guard.max_connections = kHealthPortMaxConnections;
    guard.max_connections_per_peer = kHealthPortMaxConnectionsPerPeer;
    guard.fd_reserve = FdReserve() / 2;
    guard.shed = options.connections.guard;
    guard.inspect_http2 = true;
    guard.http2.max_streams_before_ack = options.connections.max_concurrent_streams;
    ConnectionGuard::Get().Guard(health_port, guard);
    guarded_ports.push_back(health_port);
    return absl::OkStatus();
  }

  // The gRPC service on options.address, guarded and probed; on error both
  // servers are stopped.
  absl::Status StartMainPort(const ServerOptions& options,
                             std::shared_ptr<grpc::ServerCredentials> credentials) {
    grpc::ServerBuilder builder;
    builder.SetOption(std::make_unique<ReflectionOption>(true));
    builder.AddListeningPort(options.address, std::move(credentials), &port);
    builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
    builder.SetMaxSendMessageSize(options.max_receive_message_bytes);
    builder.RegisterService(service.get());
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        interceptors;
    interceptors.push_back(MakeWatchTokenCheck(authenticator.get()));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
    AddConnectionLimits(options.connections, builder);
    RefuseCompressedRequests(builder);
    ListenExclusively(builder);
    server = builder.BuildAndStart();
    if (server == nullptr || port == 0) {
      StopServersNow();
      return absl::UnavailableError(
          absl::StrCat("cannot listen on '", options.address, "' (in use or not an address?)"));
    }
    // The service is also known to health checks by its name, not only as
    // the whole server (""); both follow the same status
    // (SetServingStatus(bool) sets every registered name).
    for (grpc::Server* started : {server.get(), health_server.get()}) {
      if (started == nullptr) continue;
      started->GetHealthCheckService()->SetServingStatus(
          std::string(v1::PredictionService::service_full_name()), false);
    }
    const absl::Status guarded = GuardMainPort(options);
    if (!guarded.ok()) StopServersNow();
    return guarded;
  }

  // Routes the main port through the connection guard, proves that it
  // accepts before health says SERVING, and starts the self-probes.
  absl::Status GuardMainPort(const ServerOptions& options) {
    auto probe_address = ProbeAddressFor(options.address, port);
    // Unix sockets have no port to guard or probe.
    if (absl::IsUnimplemented(probe_address.status())) return absl::OkStatus();
    if (!probe_address.ok()) return probe_address.status();
    PortGuard guard;
    guard.max_connections = options.connections.max_connections;
    guard.max_connections_per_peer = options.connections.max_connections_per_peer;
    guard.fd_reserve = FdReserve();
    guard.shed = options.connections.guard;
    // Under TLS the bytes are ciphertext at the socket.
    guard.inspect_http2 = !options.tls.enabled();
    guard.http2.max_streams_before_ack = options.connections.max_concurrent_streams;
    ConnectionGuard::Get().Guard(port, guard);
    guarded_ports.push_back(port);
    const absl::Status first =
        ConnectionGuard::Get().ProbeListener(*probe_address, kStartProbeTimeout);
    if (!first.ok()) {
      return absl::UnavailableError(
          absl::StrCat("the gRPC listener on '", options.address,
                       "' did not pass its first self-probe: ", first.message()));
    }
    if (options.connections.self_probe_interval > absl::ZeroDuration()) {
      StartProber(*probe_address, options.connections.self_probe_interval);
    }
    return absl::OkStatus();
  }

  // Stops both gRPC servers at once, for a start-up that failed.
  void StopServersNow() {
    if (server != nullptr) server->Shutdown(std::chrono::system_clock::now());
    if (health_server != nullptr) health_server->Shutdown(std::chrono::system_clock::now());
  }

  void StartRefresher(absl::Duration interval) {
    refresher = std::thread([this, interval] {
      while (true) {
        {
          absl::MutexLock lock(&refresh_mutex);
          refresh_mutex.AwaitWithTimeout(absl::Condition(&stop_refresh), interval);
          if (stop_refresh) return;
        }
        metrics->SetStoredTraces(static_cast<double>(backend->stored_traces()));
      }
    });
  }
  void StopRefresher() {
    {
      absl::MutexLock lock(&refresh_mutex);
      stop_refresh = true;
    }
    if (refresher.joinable()) refresher.join();
  }

  void UpdateHealthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(health_mutex) {
    const bool serving = !draining && listener_accepts;
    server->GetHealthCheckService()->SetServingStatus(serving);
    if (health_server != nullptr) health_server->GetHealthCheckService()->SetServingStatus(serving);
  }
  void SetDraining() {
    absl::MutexLock lock(&health_mutex);
    draining = true;
    UpdateHealthLocked();
  }

  // gRPC 1.51 can lose its listener while the process, the health service
  // and the health-only port carry on (EMFILE was one way, see
  // connection_guard.h); this makes health say so, so that orchestrators
  // restart the server.
  void StartProber(const std::string& probe_address, absl::Duration interval) {
    prober = std::thread([this, probe_address, interval] {
      int failures = 0;
      while (true) {
        {
          absl::MutexLock lock(&health_mutex);
          health_mutex.AwaitWithTimeout(absl::Condition(&stop_probe), interval);
          if (stop_probe) return;
        }
        const absl::Status probe = ConnectionGuard::Get().ProbeListener(
            probe_address, std::min(interval, kSelfProbeTimeout));
        absl::MutexLock lock(&health_mutex);
        if (stop_probe) return;
        if (probe.ok()) {
          failures = 0;
          if (!listener_accepts) {
            std::fprintf(stderr,
                         "habitat-server: the gRPC listener on port %d accepts connections "
                         "again; health SERVING\n",
                         port);
            listener_accepts = true;
            UpdateHealthLocked();
          }
        } else if (++failures >= kSelfProbeFailures && listener_accepts) {
          std::fprintf(stderr,
                       "habitat-server: the gRPC listener on port %d failed %d checks in a "
                       "row (%s); health NOT_SERVING\n",
                       port, failures, std::string(probe.message()).c_str());
          listener_accepts = false;
          UpdateHealthLocked();
        }
      }
    });
  }
  void StopProber() {
    {
      absl::MutexLock lock(&health_mutex);
      stop_probe = true;
    }
    if (prober.joinable()) prober.join();
  }
};

PredictionServer::PredictionServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PredictionServer::~PredictionServer() {
  if (impl_ != nullptr && !impl_->shut_down) Shutdown(absl::Seconds(1));
}

absl::StatusOr<std::unique_ptr<PredictionServer>> PredictionServer::Start(
    const ServerOptions& options) {
  HABITAT_RETURN_IF_ERROR(CheckServerOptions(options));
  // Files first: a typo in a flag should not wait for the data to load.
  HABITAT_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                           MakeServerCredentials(options.tls));
  auto impl = std::make_unique<Impl>();
  HABITAT_ASSIGN_OR_RETURN(impl->authenticator, LoadAuthenticator(options.token_file));
  HABITAT_RETURN_IF_ERROR(impl->OpenBackend(options));
  HABITAT_RETURN_IF_ERROR(impl->StartMetrics(options));
  impl->CreateService(options);
  // The health service is not behind the token check (only
  // PredictionService handlers authenticate), so probes need no token.
  grpc::EnableDefaultHealthCheckService(true);
  HABITAT_RETURN_IF_ERROR(impl->StartHealthPort(options));
  HABITAT_RETURN_IF_ERROR(impl->StartMainPort(options, std::move(credentials)));
  {
    absl::MutexLock lock(&impl->health_mutex);
    impl->UpdateHealthLocked();
  }
  return std::unique_ptr<PredictionServer>(new PredictionServer(std::move(impl)));
}

int PredictionServer::port() const { return impl_->port; }
int PredictionServer::metrics_port() const { return impl_->metrics_port; }
int PredictionServer::health_port() const { return impl_->health_port; }

absl::StatusOr<size_t> PredictionServer::ReloadTokens() {
  if (!impl_->authenticator->enabled()) {
    return absl::FailedPreconditionError("authentication is off (no --token_file)");
  }
  auto loaded = impl_->authenticator->Reload();
  impl_->metrics->RecordTokenReload(loaded.ok());
  return loaded;
}

absl::Status PredictionServer::ReloadCatalogs() { return impl_->backend->ReloadCatalogs(); }

void PredictionServer::Shutdown(absl::Duration grace) {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  // Counted from here: the grace the operator gave is for the calls.
  impl_->service->StopWorkAt(absl::Now() + grace);
  impl_->SetDraining();
  impl_->server->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
  // After the main server: probes see NOT_SERVING while it drains.
  if (impl_->health_server != nullptr) {
    impl_->health_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

void PredictionServer::Wait() {
  impl_->server->Wait();
  if (impl_->health_server != nullptr) impl_->health_server->Wait();
  impl_->StopProber();
}

}  // namespace habitat
