// Predict latency on the real ResNet-50 H100 fixture (batch 64, fp32) to every
// GPU, through the same backend the server and the CLI use.
//   cold: nothing memoised (cache disabled), so every device is predicted.
//   warm: (trace, device) predictions memoised, as for a scheduler repeating
//         a Predict by trace id; "serialized": the server's path, the
//         whole answer's bytes from the answer cache.
//   fit:  the agent's ResNet-50 trace with memory (H100, batch 16), every GPU
//         at the largest batch that fits it; and the sweep a fit replaces,
//         every GPU at 12 batch sizes (2 to 4096), cold.
//   parallel: the same trace on every GPU with 12 data-parallel
//         configurations ({1, 2, 4, 8} GPUs x {1, 2, 4} nodes), cold.
// Run: build/tools/bench_predict/bench_predict --benchmark_repetitions=5
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "common/file_io.h"
#include "core/backend/prediction_backend.h"
#include "core/kineto/kineto_import.h"

namespace habitat {
namespace {

const v1::Trace& Fixture() {
  static const v1::Trace* trace = [] {
    auto json =
        ReadFile(std::string(HABITAT_TESTDATA_DIR) + "/kineto/h100/resnet50_b64_fp32.json.gz");
    if (!json.ok()) std::abort();
    KinetoImportOptions options;
    options.model_name = "resnet50";
    options.batch_size = 64;
    auto imported = ImportKinetoTrace(*json, options);
    if (!imported.ok()) std::abort();
    return new v1::Trace(std::move(*imported));
  }();
  return *trace;
}

// cache_entries 0: nothing memoised, neither whole predictions nor the
// kernel-varying model's outputs.
std::unique_ptr<PredictionBackend> MakeBackend(size_t cache_entries) {
  BackendOptions options;
  options.data_dir = HABITAT_DATA_DIR;
  options.models_dir = HABITAT_MODELS_DIR;
  options.cache_entries = cache_entries;
  options.model_memo_entries = cache_entries == 0 ? 0 : 1 << 16;
  auto backend = PredictionBackend::Create(options, std::make_unique<InMemoryTraceStore>());
  if (!backend.ok()) std::abort();
  return std::move(*backend);
}

v1::PredictRequest ByIdRequest(PredictionBackend& backend) {
  v1::UploadTraceRequest upload;
  *upload.mutable_trace() = Fixture();
  auto stored = backend.UploadTrace(upload);
  if (!stored.ok()) std::abort();
  v1::PredictRequest request;
  request.set_trace_id(stored->trace_id());
  request.set_catalog("aws");
  return request;
}

// `trace` sent inline, priced from the aws catalog.
v1::PredictRequest InlineRequest(const v1::Trace& trace) {
  v1::PredictRequest request;
  *request.mutable_trace() = trace;
  request.set_catalog("aws");
  return request;
}

// One Predict in the timed loop; a failure skips the benchmark with `failure`.
void PredictOnce(benchmark::State& state, PredictionBackend& backend,
                 const v1::PredictRequest& request, const char* failure = "predict failed") {
  auto response = backend.Predict(request);
  if (!response.ok()) state.SkipWithError(failure);
  benchmark::DoNotOptimize(response);
}

// The benchmark loop: `request` once per iteration.
void PredictEachIteration(benchmark::State& state, PredictionBackend& backend,
                          const v1::PredictRequest& request,
                          const char* failure = "predict failed") {
  for (auto _ : state) PredictOnce(state, backend, request, failure);
}

void BM_PredictCold(benchmark::State& state) {
  auto backend = MakeBackend(/*cache_entries=*/0);
  const v1::PredictRequest request = ByIdRequest(*backend);
  PredictEachIteration(state, *backend, request);
  state.counters["devices"] = backend->ListDevices({}).devices_size();
}
BENCHMARK(BM_PredictCold)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_PredictWarm(benchmark::State& state) {
  auto backend = MakeBackend(/*cache_entries=*/4096);
  const v1::PredictRequest request = ByIdRequest(*backend);
  if (!backend->Predict(request).ok()) std::abort();  // fill the memo
  PredictEachIteration(state, *backend, request);
}
BENCHMARK(BM_PredictWarm)->Unit(benchmark::kMicrosecond)->MinTime(2.0);

// What the server does for a repeated call by trace id: the serialised
// answer from the answer cache (after a check that the trace is stored).
void BM_PredictWarmSerialized(benchmark::State& state) {
  auto backend = MakeBackend(/*cache_entries=*/4096);
  const v1::PredictRequest request = ByIdRequest(*backend);
  auto first = backend->PredictSerialized(request, RequestContext());
  if (!first.ok()) std::abort();
  state.counters["answer_bytes"] = static_cast<double>(first->bytes->size());
  for (auto _ : state) {
    auto answer = backend->PredictSerialized(request, RequestContext());
    if (!answer.ok()) state.SkipWithError("predict failed");
    benchmark::DoNotOptimize(answer);
  }
}
BENCHMARK(BM_PredictWarmSerialized)->Unit(benchmark::kMicrosecond)->MinTime(2.0);

// Inline trace: the id must be recomputed (hash of the serialised trace) and
// the trace validated on every request, even when memoised.
void BM_PredictWarmInline(benchmark::State& state) {
  auto backend = MakeBackend(/*cache_entries=*/4096);
  const v1::PredictRequest request = InlineRequest(Fixture());
  if (!backend->Predict(request).ok()) std::abort();
  PredictEachIteration(state, *backend, request);
  state.counters["trace_bytes"] = request.trace().ByteSizeLong();
}
BENCHMARK(BM_PredictWarmInline)->Unit(benchmark::kMillisecond)->MinTime(2.0);

const v1::Trace& TraceWithMemory() {
  static const v1::Trace* trace = [] {
    auto bytes = ReadFile(std::string(HABITAT_TESTDATA_DIR) +
                          "/agent_suite/h100_memory/resnet50_b16_fp32.trace.gz");
    auto* parsed = new v1::Trace;
    if (!bytes.ok() || !parsed->ParseFromString(*bytes) || !parsed->has_memory()) std::abort();
    return parsed;
  }();
  return *trace;
}

void BM_FitCold(benchmark::State& state) {
  auto backend = MakeBackend(/*cache_entries=*/0);
  v1::PredictRequest request = InlineRequest(TraceWithMemory());
  request.mutable_fit();
  PredictEachIteration(state, *backend, request, "fit failed");
}
BENCHMARK(BM_FitCold)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_BatchSweepCold(benchmark::State& state) {
  auto backend = MakeBackend(/*cache_entries=*/0);
  v1::PredictRequest request = InlineRequest(TraceWithMemory());
  for (auto _ : state) {
    for (uint32_t batch = 2; batch <= 4096; batch *= 2) {
      request.set_batch_size(batch);
      PredictOnce(state, *backend, request);
    }
  }
}
BENCHMARK(BM_BatchSweepCold)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_ParallelGridCold(benchmark::State& state) {
  auto backend = MakeBackend(/*cache_entries=*/0);
  v1::PredictRequest request = InlineRequest(TraceWithMemory());
  for (uint32_t gpus : {1, 2, 4, 8}) {
    for (uint32_t nodes : {1, 2, 4}) {
      v1::ParallelConfig* config = request.add_parallel();
      config->set_gpus_per_node(gpus);
      config->set_nodes(nodes);
    }
  }
  PredictEachIteration(state, *backend, request);
}
BENCHMARK(BM_ParallelGridCold)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
}  // namespace habitat

BENCHMARK_MAIN();
