// habitat-server: the prediction service.
#include <csignal>
#include <cstdio>
#include <pthread.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "server/prediction_server.h"

#ifndef HABITAT_DEFAULT_DATA_DIR
#define HABITAT_DEFAULT_DATA_DIR "data"
#endif

ABSL_FLAG(std::string, address, "0.0.0.0:50051", "gRPC listen address (host:port)");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0:9464",
          "Prometheus /metrics listen address; empty disables it");
ABSL_FLAG(std::string, data_dir, HABITAT_DEFAULT_DATA_DIR,
          "Directory with devices.textproto and catalogs/");
ABSL_FLAG(std::string, trace_dir, "",
          "Directory where uploaded traces are stored; empty keeps them in memory");
ABSL_FLAG(int, cache_entries, 4096, "Memoised (trace, device) predictions kept");
ABSL_FLAG(int, max_message_mb, 64, "Largest request accepted, in MiB");
ABSL_FLAG(int, shutdown_grace_seconds, 10,
          "On SIGTERM, how long in-flight RPCs may take before they are cancelled");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Predicts DNN training iteration time on other GPUs.");
  absl::ParseCommandLine(argc, argv);

  // Block the shutdown signals in every thread; the main thread waits for
  // them below and drains the server.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  habitat::ServerOptions options;
  options.address = absl::GetFlag(FLAGS_address);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  options.backend.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.backend.trace_dir = absl::GetFlag(FLAGS_trace_dir);
  options.backend.cache_entries = static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_cache_entries)));
  options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_message_mb) << 20;

  auto server = habitat::PredictionServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "habitat-server: cannot start: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "habitat-server: serving on port %d (metrics on port %d)\n",
               (*server)->port(), (*server)->metrics_port());

  int received = 0;
  sigwait(&signals, &received);
  std::fprintf(stderr, "habitat-server: signal %d, draining in-flight RPCs\n", received);
  (*server)->Shutdown(absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds)));
  (*server)->Wait();
  std::fprintf(stderr, "habitat-server: stopped\n");
  return 0;
}
