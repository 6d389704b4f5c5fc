#include "server/server_options_check.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace habitat {
namespace {

constexpr int64_t kMib = int64_t{1} << 20;
// gRPC holds a message size in an int: 2047 whole MiB fit.
constexpr int64_t kMaxMessageBytes = 2047 * kMib;
// Far beyond any machine, and far from overflowing in bytes.
constexpr int64_t kMaxMemoryBytes = (int64_t{1} << 30) * kMib;
constexpr int64_t kMaxTenantBytes = (int64_t{1} << 40) * kMib;
// About 31 years; the flags take seconds as doubles.
constexpr absl::Duration kMaxConnectionDuration = absl::Seconds(int64_t{1000000000});

absl::Status CheckRequestOptions(const ServerOptions& options) {
  if (options.max_receive_message_bytes <= 0 ||
      options.max_receive_message_bytes > kMaxMessageBytes) {
    return absl::InvalidArgumentError("--max_message_mb must be 1..2047");
  }
  if (options.max_concurrent_rpcs < 0) {
    return absl::InvalidArgumentError("--max_concurrent_rpcs must be >= 0 (0: no limit)");
  }
  if (options.max_request_time < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--max_request_seconds must be >= 0 (0: no limit)");
  }
  if (options.request_memory_bytes < 0 || options.request_memory_bytes > kMaxMemoryBytes) {
    return absl::InvalidArgumentError("--request_memory_mib must be 0..2^30 (0: no limit)");
  }
  if (options.work_threads < 0) {
    return absl::InvalidArgumentError("--work_threads must be >= 0 (0: one per CPU)");
  }
  if (options.stored_traces_refresh <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the stored-traces refresh interval must be positive");
  }
  return absl::OkStatus();
}

absl::Status CheckStoreOptions(const ServerOptions& options) {
  if (options.trace_retention_days < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--trace_retention_days must be >= 0 (got ",
                                                   options.trace_retention_days, ")"));
  }
  if (options.tenant_quota.max_traces < 0 || options.tenant_quota.max_bytes < 0 ||
      options.tenant_quota.max_bytes > kMaxTenantBytes) {
    return absl::InvalidArgumentError(
        "--tenant_max_traces and --tenant_max_mib must be >= 0 (and --tenant_max_mib at most "
        "2^40)");
  }
  return absl::OkStatus();
}

absl::Status CheckBackendLimits(const BackendOptions& options) {
  if (options.max_predict_work < 0) {
    return absl::InvalidArgumentError("--max_predict_work must be >= 0 (0: no limit)");
  }
  const TraceLimits& limits = options.trace_limits;
  const std::pair<const char*, int64_t> trace_limits[] = {
      {"max_trace_host_events", limits.max_host_events},
      {"max_trace_operations", limits.max_operations},
      {"max_trace_kernels_per_pass", limits.max_kernels_per_pass},
      {"max_trace_kernels", limits.max_total_kernels},
      {"max_trace_name_bytes", limits.max_name_bytes}};
  for (const auto& [flag, value] : trace_limits) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " must be >= 1 (got ", value, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckConnectionOptions(const ConnectionOptions& options) {
  if (options.max_connections_per_peer < 0) {
    return absl::InvalidArgumentError("--max_connections_per_peer must be >= 0 (0: no limit)");
  }
  if (options.max_connections < 0) {
    return absl::InvalidArgumentError("--max_connections must be >= 0 (0: no limit)");
  }
  const std::pair<const char*, absl::Duration> durations[] = {
      {"max_connection_idle_seconds", options.max_idle},
      {"max_connection_age_seconds", options.max_age},
      {"max_connection_age_grace_seconds", options.max_age_grace},
      {"handshake_timeout_seconds", options.handshake_timeout},
      {"min_client_ping_interval_seconds", options.min_client_ping_interval},
      {"self_probe_seconds", options.self_probe_interval}};
  for (const auto& [flag, value] : durations) {
    if (value < absl::ZeroDuration() || value > kMaxConnectionDuration) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be 0..1e9 seconds"));
    }
  }
  if (options.handshake_timeout == absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--handshake_timeout_seconds must be > 0");
  }
  if (options.max_ping_strikes < 0) {
    return absl::InvalidArgumentError("--max_ping_strikes must be >= 0 (0: no limit)");
  }
  if (options.max_concurrent_streams < 0) {
    return absl::InvalidArgumentError("--max_concurrent_streams must be >= 0 (0: no limit)");
  }
  if (options.grpc_memory_quota_bytes < 0 || options.grpc_memory_quota_bytes > kMaxMemoryBytes) {
    return absl::InvalidArgumentError("--grpc_memory_quota_mb must be 0..2^30 (0: no quota)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckServerOptions(const ServerOptions& options) {
  HABITAT_RETURN_IF_ERROR(CheckRequestOptions(options));
  HABITAT_RETURN_IF_ERROR(CheckStoreOptions(options));
  HABITAT_RETURN_IF_ERROR(CheckBackendLimits(options.backend));
  return CheckConnectionOptions(options.connections);
}

}  // namespace habitat
