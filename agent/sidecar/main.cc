// habitat-agent: runs beside a training container and ships the traces its
// tracker drops into a shared spool directory to the prediction server.
//
//   habitat-agent --spool_dir=DIR --server=HOST:PORT    runs until SIGTERM
//   habitat-agent ship FILE --server=HOST:PORT          one upload, prints the id
// TLS (--tls_ca, --tls_cert, --tls_key) and a bearer token (--token_file)
// reach a server started with --tls_cert and --token_file.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/sidecar/spool.h"
#include "common/file_io.h"
#include "common/program_flags.h"

ABSL_FLAG(std::string, spool_dir, "", "Directory the tracker writes NAME.trace files into");
ABSL_FLAG(std::string, server, "", "Prediction server address, host:port");
ABSL_FLAG(int, poll_ms, 500, "How often the spool is scanned, in milliseconds");
ABSL_FLAG(int, initial_backoff_ms, 250, "First retry delay after a failed upload");
ABSL_FLAG(int, max_backoff_s, 30, "Longest retry delay while the server is down");
ABSL_FLAG(int, settle_s, 10,
          "A file that does not parse is rejected only after it has not changed for this long");
ABSL_FLAG(int, rpc_timeout_s, 60, "Deadline of one UploadTrace or Predict call");
ABSL_FLAG(int, max_upload_mb, 64,
          "Largest trace sent, in MiB (match the server's --max_message_mb); larger ones are "
          "moved to rejected/");
ABSL_FLAG(std::string, token_file, "",
          "File holding the bearer token (the whole file; surrounding whitespace ignored). "
          "Read at start, on every reconnection and after the server refuses the token, so a "
          "rotated Kubernetes Secret is picked up without a restart; empty: no token");
ABSL_FLAG(bool, tls, false, "Use TLS, verifying the server against the system's CAs");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificates the server's certificate must chain to (implies --tls)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate chain, for servers that require one; with --tls_key "
          "(implies --tls)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name the server's certificate must carry, when not the host of --server "
          "(implies --tls)");
ABSL_FLAG(std::string, predict_devices, "",
          "After each upload, predict for these device ids (comma separated; 'all' for every "
          "device) and write NAME.prediction.json; empty: no predictions");

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

struct PredictChoice {
  bool enabled = false;
  std::vector<std::string> devices;
};

PredictChoice ParsePredictDevices(const std::string& flag) {
  PredictChoice choice;
  if (flag.empty()) return choice;
  choice.enabled = true;
  if (flag == "all") return choice;
  choice.devices = absl::StrSplit(flag, ',', absl::SkipWhitespace());
  return choice;
}

// The token in --token_file, read now; "" without the flag.
absl::StatusOr<std::string> ReadToken() {
  const std::string path = absl::GetFlag(FLAGS_token_file);
  if (path.empty()) return std::string();
  auto text = habitat::ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("cannot read --token_file: ", text.status().message()));
  }
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--token_file '", path, "' is empty"));
  }
  return token;
}

// Everything but the token, which ClientOptionsNow reads afresh.
habitat::ClientOptions BaseClientOptions(int attempts) {
  habitat::ClientOptions options;
  options.deadline = absl::Seconds(std::max(1, absl::GetFlag(FLAGS_rpc_timeout_s)));
  options.max_attempts = attempts;
  options.max_message_bytes = std::clamp(absl::GetFlag(FLAGS_max_upload_mb), 1, 2047) << 20;
  options.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  options.tls.enabled = absl::GetFlag(FLAGS_tls) || !options.tls.ca_file.empty() ||
                        !options.tls.cert_file.empty() || !options.tls.key_file.empty() ||
                        !options.tls.server_name.empty();
  return options;
}

absl::StatusOr<habitat::ClientOptions> ClientOptionsNow(int attempts) {
  habitat::ClientOptions options = BaseClientOptions(attempts);
  auto token = ReadToken();
  if (!token.ok()) return token.status();
  options.bearer_token = std::move(*token);
  return options;
}

// A client with the token and TLS files as they are now.
absl::StatusOr<std::unique_ptr<habitat::PredictionClient>> ConnectNow(const std::string& server,
                                                                      int attempts) {
  auto options = ClientOptionsNow(attempts);
  if (!options.ok()) return options.status();
  return habitat::PredictionClient::Connect(server, std::move(*options));
}

int Ship(const std::string& path, const std::string& server) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "habitat-agent ship: cannot open '%s': %s\n", path.c_str(),
                 std::strerror(errno));
    return kExitFailure;
  }
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  auto trace = habitat::agent::ParseSpoolTrace(
      path, bytes, static_cast<size_t>(BaseClientOptions(3).max_message_bytes));
  if (!trace.ok()) {
    std::fprintf(stderr, "habitat-agent ship: %s\n", std::string(trace.status().message()).c_str());
    return kExitFailure;
  }
  auto client = ConnectNow(server, 3);
  if (!client.ok()) {
    std::fprintf(stderr, "habitat-agent ship: %s\n",
                 std::string(client.status().message()).c_str());
    return kExitUsage;
  }
  habitat::v1::UploadTraceRequest request;
  *request.mutable_trace() = std::move(*trace);
  auto ack = (*client)->UploadTrace(request);
  if (!ack.ok()) {
    std::fprintf(stderr, "habitat-agent ship: upload of '%s' failed: %s\n", path.c_str(),
                 ack.status().ToString().c_str());
    return kExitFailure;
  }
  std::printf("%s\n", ack->trace_id().c_str());
  std::fprintf(stderr, "habitat-agent ship: %s\n",
               ack->created() ? "stored" : "already stored (same content)");
  const PredictChoice predict = ParsePredictDevices(absl::GetFlag(FLAGS_predict_devices));
  if (!predict.enabled) return kExitOk;
  habitat::v1::PredictRequest predict_request;
  predict_request.set_trace_id(ack->trace_id());
  for (const auto& device : predict.devices) predict_request.add_devices(device);
  auto response = (*client)->Predict(predict_request);
  if (!response.ok()) {
    std::fprintf(stderr, "habitat-agent ship: prediction failed: %s\n",
                 response.status().ToString().c_str());
    return kExitFailure;
  }
  for (const auto& p : response->predictions()) {
    std::printf("%s\t%.3f ms\n", p.device_id().c_str(), static_cast<double>(p.gpu_time_ns()) / 1e6);
  }
  return kExitOk;
}

int RunSpool(const std::string& server) {
  // Block the stop signals in every thread (gRPC's included); one thread
  // waits for them and asks the uploader to stop after the current file.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // One attempt per call: the uploader does its own backoff across files.
  // A bad token file or TLS option stops the start; later, a client made
  // after a reconnection or a refused token reads them again.
  if (auto first = ConnectNow(server, 1); !first.ok()) {
    std::fprintf(stderr, "habitat-agent: %s\n", std::string(first.status().message()).c_str());
    return kExitUsage;
  }
  habitat::agent::ClientFactory connect = [server] { return ConnectNow(server, 1); };
  habitat::agent::SpoolOptions options;
  options.spool_dir = absl::GetFlag(FLAGS_spool_dir);
  options.server_label = server;
  options.poll_interval = absl::Milliseconds(absl::GetFlag(FLAGS_poll_ms));
  options.backoff.initial = absl::Milliseconds(absl::GetFlag(FLAGS_initial_backoff_ms));
  options.backoff.max = absl::Seconds(absl::GetFlag(FLAGS_max_backoff_s));
  options.settle_time = absl::Seconds(std::max(0, absl::GetFlag(FLAGS_settle_s)));
  options.max_upload_bytes = static_cast<size_t>(BaseClientOptions(1).max_message_bytes);
  const PredictChoice predict = ParsePredictDevices(absl::GetFlag(FLAGS_predict_devices));
  options.predict = predict.enabled;
  options.predict_devices = predict.devices;
  auto uploader = habitat::agent::SpoolUploader::Create(std::move(options), std::move(connect));
  if (!uploader.ok()) {
    std::fprintf(stderr, "habitat-agent: %s\n", std::string(uploader.status().message()).c_str());
    return absl::IsInvalidArgument(uploader.status()) ? kExitUsage : kExitFailure;
  }
  std::thread waiter([&signals, u = uploader->get()] {
    int received = 0;
    sigwait(&signals, &received);
    std::fprintf(stderr, "habitat-agent: signal %d, stopping after the current upload\n", received);
    u->Stop();
  });
  (*uploader)->Run();
  waiter.join();
  const habitat::agent::SpoolStats stats = (*uploader)->stats();
  std::fprintf(stderr,
               "habitat-agent: uploaded %d (%d already stored), recovered %d, rejected %d, "
               "%d trace(s) left in the spool\n",
               stats.uploaded, stats.already_stored, stats.recovered, stats.rejected,
               (*uploader)->pending());
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  habitat::SetProgramFlagsUsage(
      "habitat-agent",
      "Ships habitat traces to the prediction server.\n"
      "  habitat-agent --spool_dir=DIR --server=HOST:PORT [--poll_ms=500] [--max_backoff_s=30]\n"
      "                [--predict_devices=all|ID,ID...]\n"
      "                [--tls_ca=PEM] [--tls_cert=PEM --tls_key=PEM] [--token_file=FILE]\n"
      "  habitat-agent ship FILE --server=HOST:PORT [--predict_devices=...]");
  std::vector<char*> positional = habitat::ParseProgramFlags(argc, argv);
  const std::string server = absl::GetFlag(FLAGS_server);
  if (server.empty()) {
    std::fprintf(stderr, "habitat-agent: --server=HOST:PORT is required\n");
    return kExitUsage;
  }
  if (positional.size() >= 2) {
    const std::string command = positional[1];
    if (command != "ship" || positional.size() != 3) {
      std::fprintf(stderr, "habitat-agent: expected `ship FILE` or no arguments, got '%s'%s\n",
                   command.c_str(), positional.size() > 3 ? " and more" : "");
      return kExitUsage;
    }
    return Ship(positional[2], server);
  }
  if (absl::GetFlag(FLAGS_spool_dir).empty()) {
    std::fprintf(stderr, "habitat-agent: --spool_dir is required (or use `ship FILE`)\n");
    return kExitUsage;
  }
  return RunSpool(server);
}
