// Cost of the kernel-varying path per request: features for one pass, and
// one batched call of the trained trees over the parity reference's rows.
//   build/core/kernel_varying/kernel_varying_benchmark
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/file_io.h"
#include "core/devices/device_database.h"
#include "core/kernel_varying/features.h"
#include "core/kernel_varying/kernel_varying_model.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace kernel_varying {
namespace {

const std::string kModelDir = HABITAT_KERNEL_VARYING_DIR;

struct Inputs {
  std::vector<float> features;  // flat rows, recomputed in C++
  size_t rows = 0;
};

// Features of every parity row (real configurations and origin times).
const Inputs& ParityInputs() {
  static const Inputs* inputs = [] {
    auto* out = new Inputs();
    auto db = DeviceDatabase::LoadFromFile(HABITAT_DATA_DIR "/devices.textproto");
    auto text = ReadFile(kModelDir + "/parity_reference.json");
    if (!db.ok() || !text.ok()) return out;
    for (const auto& e : nlohmann::json::parse(*text)) {
      OpConfig config{};
      for (const auto& [key, value] : e["config"].items()) {
        config[*ParseConfigColumn(key)] = value.get<int64_t>();
      }
      auto origin = db->Get(e["origin"].get<std::string>());
      auto target = db->Get(e["target"].get<std::string>());
      auto origin_mode = ParseMathMode(e["origin_mode"].get<std::string>());
      auto target_mode = ParseMathMode(e["target_mode"].get<std::string>());
      if (!origin.ok() || !target.ok() || !origin_mode.ok() || !target_mode.ok()) continue;
      double ratio = 0;
      if (AppendFeatures(*ParseFamily(e["family"].get<std::string>()), config, *origin_mode,
                         *target_mode, e["backward"].get<bool>(), **origin, **target,
                         e["origin_ns"].get<double>(), &out->features, &ratio)
              .ok()) {
        ++out->rows;
      }
    }
    return out;
  }();
  return *inputs;
}

void BM_Features(benchmark::State& state) {
  auto db = DeviceDatabase::LoadFromFile(HABITAT_DATA_DIR "/devices.textproto");
  const auto& origin = **db->Get("H100-SXM");
  const auto& target = **db->Get("A100-SXM-80GB");
  OpConfig config{};
  config[kB] = 16;
  config[kCIn] = 256;
  config[kCOut] = 256;
  config[kKernel] = 3;
  config[kStride] = 1;
  config[kPadding] = 1;
  config[kSize] = 14;
  std::vector<float> out;
  double ratio = 0;
  for (auto _ : state) {
    out.clear();
    benchmark::DoNotOptimize(AppendFeatures(Family::kConv2d, config, MathMode::kTf32,
                                            MathMode::kTf32, true, origin, target, 123456, &out,
                                            &ratio));
  }
}
BENCHMARK(BM_Features);

void BM_PredictLog2Corrections(benchmark::State& state) {
  static auto model = KernelVaryingModel::Load(kModelDir);
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  const Inputs& parity = ParityInputs();
  const size_t rows = static_cast<size_t>(state.range(0));
  std::vector<float> batch;
  batch.reserve(rows * kFeatureCount);
  for (size_t i = 0; i < rows && parity.rows > 0; ++i) {
    const size_t r = i % parity.rows;
    batch.insert(batch.end(), parity.features.begin() + r * kFeatureCount,
                 parity.features.begin() + (r + 1) * kFeatureCount);
  }
  for (auto _ : state) {
    auto out = (*model)->PredictLog2Corrections(batch, rows);
    if (!out.ok()) state.SkipWithError("prediction failed");
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(rows));
}
BENCHMARK(BM_PredictLog2Corrections)->Arg(1)->Arg(64)->Arg(1024)->Arg(4096);

}  // namespace
}  // namespace kernel_varying
}  // namespace habitat

BENCHMARK_MAIN();
