// Cost of the DDP step model over the configuration grid of
// docs/multi_gpu.md, section 4: 21 target GPUs x {1, 2, 4, 8} GPUs per node x
// {1, 2, 4} nodes (252 predictions) for a ResNet-50-sized iteration.
//   build/core/parallel/ddp_timeline_benchmark
#include <algorithm>
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/parallel/ddp_timeline.h"

namespace habitat {
namespace {

constexpr int kGpus = 21;
constexpr int kBackwardOps = 160;

// ResNet-50's shape: 53 convolutions, 53 BatchNorms (weight and bias) and the
// fc layer: 161 tensors, ~25.6 M fp32 parameters, gradients ready in reverse
// declaration order over ~160 backward operations. Sizes are synthetic.
SingleGpuIteration ResNet50Like(double speed) {
  SingleGpuIteration it;
  it.forward_ns = static_cast<int64_t>(12'000'000 / speed);
  it.optimizer_ns = static_cast<int64_t>(1'500'000 / speed);
  for (int op = 0; op < kBackwardOps; ++op) {
    it.backward_op_ns.push_back(static_cast<int64_t>((80'000 + 1'000 * (op % 37)) / speed));
  }
  // Backward starts at the fc layer: weight 2048 x 1000, bias 1000.
  it.params.push_back({2048 * 1000 * 4, 0});
  it.params.push_back({1000 * 4, 0});
  for (int layer = 0; layer < 53; ++layer) {
    const int64_t channels = 2048 >> (layer / 14);          // 2048 .. 256
    const int64_t conv_elements = 650'000 - 8'000 * layer;  // ~23.4 M in all
    const int op = 3 * layer + 1;
    it.params.push_back({channels * 4, op});  // BatchNorm weight
    it.params.push_back({channels * 4, op});  // BatchNorm bias
    it.params.push_back({conv_elements * 4, std::min(op + 1, kBackwardOps - 1)});
  }
  return it;
}

struct Target {
  SingleGpuIteration iteration;
  LinkConstants link;
};

std::vector<Target> Targets() {
  std::vector<Target> out;
  for (int g = 0; g < kGpus; ++g) {
    Target t;
    t.iteration = ResNet50Like(0.5 + 0.1 * g);
    t.link.intra_node_latency_ns = 2'000;
    t.link.inter_node_latency_ns = 6'000;
    t.link.intra_node_busbw_gbps = 20.0 + 17.0 * g;  // PCIe to NVLink 4
    t.link.inter_node_gbps_per_gpu = g % 2 == 0 ? 24.0 : 48.0;
    out.push_back(std::move(t));
  }
  return out;
}

void BM_ResNet50Grid(benchmark::State& state) {
  const std::vector<Target> targets = Targets();
  int64_t sum = 0;
  for (auto _ : state) {
    for (const Target& t : targets) {
      for (int per_node : {1, 2, 4, 8}) {
        for (int nodes : {1, 2, 4}) {
          DdpConfig config;
          config.ranks_per_node = per_node;
          config.nodes = nodes;
          config.link = t.link;
          config.compute_slowdown = kH100ComputeSlowdownUnderAllReduce;
          config.per_bucket_host_ns = 30'000;
          absl::StatusOr<DdpStepPrediction> p = PredictDdpStep(t.iteration, config);
          if (!p.ok()) {
            state.SkipWithError(p.status().ToString().c_str());
            return;
          }
          sum += p->step_ns;
        }
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  state.counters["predictions"] = kGpus * 4 * 3;
}
BENCHMARK(BM_ResNet50Grid)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace habitat

BENCHMARK_MAIN();
