// Fuzz target: untrusted bytes as a serialized habitat.v1.PredictRequest,
// answered by the service logic (PredictionBackend: validation, pricing and
// the prediction engine) over the bundled GPU database and price catalogs,
// exactly as the server answers a Predict. The ResNet-50 and small-CNN agent
// fixtures and a DCGAN capture with memory records and gradient producers
// are uploaded once, so requests by trace id reach the engine too (memory,
// --fit and data-parallel predictions with the DCGAN one).
// With HABITAT_FUZZ_MODELS_DIR naming a models directory (the source tree's
// models/), the backend also loads the kernel-varying predictor, so
// convolutions, GEMMs, LSTMs and attention go through the MLP as in the
// server; without it they are carried over unscaled.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "common/file_io.h"
#include "core/backend/prediction_backend.h"
#include "core/trace/trace_validation.h"
#include "habitat/v1/prediction_service.pb.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

[[noreturn]] void SetupFailed(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "fuzz_predict setup: %s: %s\n", what.c_str(),
               std::string(status.message()).c_str());
  std::abort();
}

// Host events of the traces Backend() uploads, by trace id.
std::map<std::string, int>& UploadedHostEvents() {
  static auto* events = new std::map<std::string, int>();
  return *events;
}

habitat::PredictionBackend* Backend() {
  static habitat::PredictionBackend* backend = [] {
    habitat::BackendOptions options;
    options.data_dir = HABITAT_DATA_DIR;
    // No memo cache: every input is predicted afresh, so a crash does not
    // depend on which inputs ran before it.
    options.cache_entries = 0;
    options.model_memo_entries = 0;
    const char* models_dir = std::getenv("HABITAT_FUZZ_MODELS_DIR");
    if (models_dir != nullptr && *models_dir != '\0') {
      options.models_dir = models_dir;
      std::fprintf(stderr, "fuzz_predict: kernel-varying predictor from %s\n", models_dir);
    }
    auto created = habitat::PredictionBackend::Create(
        options, std::make_unique<habitat::InMemoryTraceStore>());
    if (!created.ok()) SetupFailed("PredictionBackend::Create", created.status());
    // The DCGAN capture has Trace.memory and gradient producers: memory
    // predictions, fits and data-parallel steps by id.
    for (const char* name : {"agent/h100/resnet50_b16_fp32", "agent/h100/smallcnn_b8_fp32",
                             "agent_suite/h100_producers/dcgan_b64_fp32"}) {
      const std::string path = std::string(HABITAT_TESTDATA_DIR) + "/" + name + ".trace.gz";
      auto bytes = habitat::ReadFile(path);
      if (!bytes.ok()) SetupFailed(path, bytes.status());
      habitat::v1::UploadTraceRequest upload;
      if (!upload.mutable_trace()->ParseFromString(*bytes)) {
        SetupFailed(path, absl::DataLossError("not a habitat.v1.Trace"));
      }
      auto uploaded = (*created)->UploadTrace(upload);
      if (!uploaded.ok()) SetupFailed(path, uploaded.status());
      UploadedHostEvents()[uploaded->trace_id()] = upload.trace().host_events_size();
    }
    return created->release();
  }();
  return backend;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  habitat::fuzz::SilenceProtobufLogs();
  habitat::PredictionBackend* backend = Backend();
  habitat::v1::PredictRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  const absl::StatusOr<habitat::v1::PredictResponse> response = backend->Predict(request);
  if (!response.ok()) {
    const absl::StatusCode code = response.status().code();
    // A fit of a trace without memory data is FAILED_PRECONDITION (the
    // backend's contract, prediction_backend_test).
    HABITAT_FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument ||
                       code == absl::StatusCode::kNotFound ||
                       (code == absl::StatusCode::kFailedPrecondition && request.has_fit()));
    HABITAT_FUZZ_CHECK(!response.status().message().empty());
    return 0;
  }
  // A prediction is a time: never negative, and ranks are 1..n.
  const int n = response->predictions_size();
  // And, for the real traces uploaded above, a plausible one. Every time in
  // a valid trace is within max_duration_ns, and the replay scales the
  // host's times by at most 1/kMinTargetHostSpeed (calibration only shrinks
  // them), so the wall time is at most the GPU time the replay runs (within
  // twice the predicted one for these traces, whose pass times match their
  // kernels) plus that many times the host timeline's span and the cost of
  // each of its waits. An overflow, or a host 1e-12 times as fast (80
  // years), is far beyond. (An inline trace's pass times need not match
  // its kernels, so its replayed GPU time has no such bound.)
  const auto uploaded = UploadedHostEvents().find(request.trace_id());
  const bool known_trace = request.has_trace_id() && uploaded != UploadedHostEvents().end();
  const double host_bound = known_trace
                                ? static_cast<double>(habitat::TraceLimits().max_duration_ns) /
                                      habitat::kMinTargetHostSpeed * (4.0 + uploaded->second)
                                : 0.0;
  for (const auto& p : response->predictions()) {
    HABITAT_FUZZ_CHECK(p.gpu_time_ns() >= 0);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    // wall_ns is deprecated, still filled: the replayed wall time, else 0.
    HABITAT_FUZZ_CHECK(p.wall_ns() == (p.wall_time_is_gpu_time() ? 0 : p.wall_time_ns()));
#pragma GCC diagnostic pop
    HABITAT_FUZZ_CHECK(p.wall_time_ns() >= 0);
    HABITAT_FUZZ_CHECK(!p.wall_time_is_gpu_time() || p.wall_time_ns() == p.gpu_time_ns());
    if (known_trace && !p.wall_time_is_gpu_time()) {
      HABITAT_FUZZ_CHECK(static_cast<double>(p.wall_time_ns()) <=
                         2.0 * static_cast<double>(p.gpu_time_ns()) + host_bound);
    }
    // Rank 0: a GPU the batch does not fit (the proto's rule), else 1..n.
    const bool unranked = p.has_memory() && !p.memory().fits();
    HABITAT_FUZZ_CHECK(unranked
                           ? p.rank_by_time() == 0
                           : p.rank_by_time() >= 1 && p.rank_by_time() <= static_cast<uint32_t>(n));
    if (p.has_memory()) HABITAT_FUZZ_CHECK(p.memory().peak_allocated_bytes() >= 0);
    // Data-parallel steps are times too, and the communication they leave
    // exposed is part of the step.
    for (const auto& parallel : p.parallel()) {
      HABITAT_FUZZ_CHECK(parallel.step_ns() >= 0);
      HABITAT_FUZZ_CHECK(parallel.exposed_communication_ns() >= 0);
      HABITAT_FUZZ_CHECK(parallel.exposed_communication_ns() <= parallel.step_ns());
      HABITAT_FUZZ_CHECK(parallel.samples_per_second() >= 0);
    }
  }
  std::string bytes;
  HABITAT_FUZZ_CHECK(response->SerializeToString(&bytes));
  return 0;
}
