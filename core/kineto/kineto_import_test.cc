// Imports every committed real-GPU torch.profiler fixture
// (tests/testdata/kineto/<gpu>/<case>.json.gz) and checks the result against
// the raw events and against what the capture script measured on the GPU
// (tests/testdata/measurements/<gpu>.json).
#include "core/kineto/kineto_import.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/time_units.h"
#include "core/testing/kineto_fixtures.h"
#include "core/trace/trace_validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace {

using habitat::v1::Operation;
using habitat::v1::Trace;
using nlohmann::json;
using testing::Fixture;
using testing::ListFixtures;
using testing::Loaded;
using testing::LoadFixture;
using testing::Measurement;
using testing::MetaInt;
using testing::PrecisionOf;

// Time during which more than one of the (start, duration) spans ran,
// weighted by how many more: sum of durations minus length of the union.
int64_t ConcurrencyExcess(const std::vector<std::pair<int64_t, int64_t>>& spans) {
  std::vector<std::pair<int64_t, int>> edges;  // (time, +1 start / -1 end)
  for (const auto& [start, duration] : spans) {
    edges.push_back({start, +1});
    edges.push_back({start + duration, -1});
  }
  std::sort(edges.begin(), edges.end());  // ends before starts at a tie
  int64_t excess = 0;
  int active = 0;
  for (size_t i = 0; i < edges.size(); ++i) {
    if (i > 0 && active > 1) {
      excess += (active - 1) * (edges[i].first - edges[i - 1].first);
    }
    active += edges[i].second;
  }
  return excess;
}

TEST(KinetoFixturesTest, FixturesAreCommitted) {
  EXPECT_FALSE(ListFixtures().empty())
      << "no tests/testdata/kineto/<gpu>/*.json.gz under " << HABITAT_TESTDATA_DIR;
}

class KinetoFixtureTest : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    measured_ = Measurement(GetParam());
    const Loaded& loaded = LoadFixture(GetParam());
    ASSERT_GT(loaded.trace.operations_size(), 0) << "the import failed";
    text_ = &loaded.text;
    raw_ = &loaded.raw;
    trace_ = &loaded.trace;
  }

  // GPU events of a category whose launch call lies in the imported step,
  // counted straight from the JSON (the capture script keeps one step's GPU
  // events, but this does not rely on it).
  int RawCount(const std::string& cat) const {
    const std::string step = trace_->metadata().at("kineto.iteration");
    double lo = 0, hi = -1;
    std::map<int64_t, double> launch_ts;
    for (const json& e : (*raw_)["traceEvents"]) {
      if (e.value("ph", "") != "X") continue;
      const std::string c = e.value("cat", "");
      if (c == "user_annotation" && e.value("name", "") == step) {
        lo = e["ts"].get<double>();
        hi = lo + e["dur"].get<double>();
      } else if (c == "cuda_runtime" || c == "cuda_driver") {
        launch_ts[e["args"]["correlation"].get<int64_t>()] = e["ts"];
      }
    }
    int n = 0;
    for (const json& e : (*raw_)["traceEvents"]) {
      if (e.value("ph", "") != "X" || e.value("cat", "") != cat) continue;
      auto it = launch_ts.find(e["args"]["correlation"].get<int64_t>());
      n += it != launch_ts.end() && it->second >= lo && it->second <= hi;
    }
    return n;
  }

  const std::string* text_ = nullptr;
  const json* raw_ = nullptr;
  const Trace* trace_ = nullptr;
  json measured_;
};

TEST_P(KinetoFixtureTest, ImportsAValidTrace) {
  // Real kernel names exceed the default 4096-byte name limit (ATen's
  // normal_ kernel from torch.randn is 5050 bytes), so validate with more.
  TraceLimits limits;
  limits.max_name_bytes = 16384;
  EXPECT_TRUE(ValidateTrace(*trace_, limits).ok()) << ValidateTrace(*trace_, limits);
  EXPECT_EQ(trace_->source(), "kineto-import");
  EXPECT_EQ(trace_->format_version(), 1u);
  EXPECT_GT(trace_->operations_size(), 10);
  EXPECT_GT(trace_->origin().sm_count(), 0u);
  EXPECT_GT(trace_->origin().compute_capability_major(), 0u);
  EXPECT_GT(trace_->origin().memory_bytes(), 0u);
  if (measured_.is_object()) {
    EXPECT_EQ(trace_->origin().name(), measured_["device_name"]);
  }
  EXPECT_FALSE(trace_->frameworks().cuda().empty());
}

TEST_P(KinetoFixtureTest, KernelCountsMatchRawEvents) {
  int kernels = trace_->unattributed_kernels_size();
  int memory = 0;
  for (const Operation& op : trace_->operations()) {
    kernels += op.forward().kernels_size() + op.backward().kernels_size();
    memory += op.forward().memory_size() + op.backward().memory_size();
  }
  memory += MetaInt(*trace_, "kineto.unattributed_memory_activities");
  EXPECT_EQ(kernels, RawCount("kernel"));
  EXPECT_EQ(memory, RawCount("gpu_memcpy") + RawCount("gpu_memset"));
  if (!measured_.is_object()) return;
  EXPECT_EQ(kernels, measured_["kept_step_kernel_count"].get<int>());
  EXPECT_EQ(memory, measured_["kept_step_memcpy_count"].get<int>() +
                        measured_["kept_step_memset_count"].get<int>());
  EXPECT_EQ(trace_->metadata().at("kineto.iteration"), measured_["kept_step"]);
  // Same definition as the capture script, computed independently. Both
  // round µs floats to ns, Python half-to-even, UsToNs half-away-from-zero;
  // at Kineto's ~4.5e15 ns timestamps doubles resolve 0.5 ns, so ties occur
  // and the totals may differ by a few ns: allow 1 ppm (+8 ns).
  const int64_t measured_busy = measured_["kept_step_gpu_busy_ns"];
  EXPECT_NEAR(trace_->iteration_gpu_busy_ns(), measured_busy, 8 + measured_busy / 1000000);
  EXPECT_EQ(MetaInt(*trace_, "kineto.profiled_step_ns"),
            measured_["kept_step_cpu_duration_ns"].get<int64_t>());
}

TEST_P(KinetoFixtureTest, AttributesAlmostAllGpuTime) {
  int64_t attributed = 0;
  for (const Operation& op : trace_->operations()) {
    attributed += op.forward().time_ns() + op.backward().time_ns();
  }
  const int64_t unattributed = MetaInt(*trace_, "kineto.unattributed_kernel_ns") +
                               MetaInt(*trace_, "kineto.unattributed_memory_ns");
  EXPECT_EQ(attributed + unattributed, MetaInt(*trace_, "kineto.gpu_time_ns"));
  const double share = static_cast<double>(attributed) / (attributed + unattributed);
  EXPECT_GE(share, 0.95);
  // Sum of pass times vs. the union: they differ exactly by the time GPU
  // activities ran concurrently, which must be accounted for.
  std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> by_stream;
  auto add = [&](const auto& list) {
    for (const auto& k : list) {
      by_stream[k.stream()].push_back({k.start_ns(), k.duration_ns()});
    }
  };
  for (const Operation& op : trace_->operations()) {
    add(op.forward().kernels());
    add(op.backward().kernels());
    add(op.forward().memory());
    add(op.backward().memory());
  }
  add(trace_->unattributed_kernels());
  std::vector<std::pair<int64_t, int64_t>> all;
  int64_t same_stream_excess = 0;
  for (const auto& [stream, spans] : by_stream) {
    same_stream_excess += ConcurrencyExcess(spans);
    all.insert(all.end(), spans.begin(), spans.end());
  }
  const int64_t excess = ConcurrencyExcess(all);
  const int64_t sum = attributed + unattributed;
  const int64_t busy = trace_->iteration_gpu_busy_ns();
  if (MetaInt(*trace_, "kineto.unattributed_memory_activities") == 0) {
    EXPECT_EQ(sum - busy, excess);  // every interval counted exactly once
  }
  // On one stream, overlap is only programmatic dependent launch (a kernel
  // starting before its predecessor ends): tiny. Across streams (cuDNN's
  // RNN kernels run on several) it is real concurrency and is reported.
  const double overlap = static_cast<double>(sum) / busy - 1.0;
  EXPECT_LE(static_cast<double>(same_stream_excess) / busy, 0.01);
  if (by_stream.size() == 1) {
    EXPECT_LE(overlap, 0.05);
  }
  std::printf(
      "[stats] %s/%s ops=%d kernels=%s memory=%s attributed=%.2f%% "
      "by_ext_id=%s sum=%.3fms busy=%.3fms (+%.2f%%: same-stream %.3fms, "
      "across %zu streams %.3fms) wall=%.3fms bwd_linked=%s/%s\n",
      GetParam().gpu.c_str(), GetParam().name.c_str(), trace_->operations_size(),
      trace_->metadata().at("kineto.kernels").c_str(),
      trace_->metadata().at("kineto.memory_activities").c_str(), 100 * share,
      trace_->metadata().at("kineto.attributed_by_external_id").c_str(), sum / 1e6, busy / 1e6,
      100 * overlap, same_stream_excess / 1e6, by_stream.size(),
      (excess - same_stream_excess) / 1e6, trace_->iteration_wall_ns() / 1e6,
      trace_->metadata().at("kineto.backward_nodes_linked").c_str(),
      trace_->metadata().at("kineto.backward_nodes").c_str());
}

TEST_P(KinetoFixtureTest, ConvAndLinearOpsHaveTensorArguments) {
  int checked = 0;
  for (const Operation& op : trace_->operations()) {
    if (op.name() != "aten::conv2d" && op.name() != "aten::linear" &&
        op.name() != "aten::conv_transpose2d" && op.name() != "aten::addmm") {
      continue;
    }
    ++checked;
    int tensors = 0;
    for (const auto& a : op.arguments()) {
      if (a.has_tensor() && a.tensor().shape_size() >= 2) {
        ++tensors;
        EXPECT_FALSE(a.tensor().dtype().empty()) << op.name();
      }
    }
    EXPECT_GE(tensors, 2) << op.name() << " at " << op.cpu_start_ns();
    // Forward kernels for every conv/linear: they compute something.
    EXPECT_GT(op.forward().kernels_size(), 0) << op.name();
  }
  if (absl::StartsWith(GetParam().name, "resnet") ||
      absl::StartsWith(GetParam().name, "inception") ||
      absl::StartsWith(GetParam().name, "dcgan") ||
      absl::StartsWith(GetParam().name, "transformer")) {
    EXPECT_GT(checked, 0) << "no conv/linear op found";
  }
}

TEST_P(KinetoFixtureTest, LinksMostBackwardPassesToForwards) {
  const int64_t nodes = MetaInt(*trace_, "kineto.backward_nodes");
  const int64_t linked = MetaInt(*trace_, "kineto.backward_nodes_linked");
  ASSERT_GT(nodes, 0) << "a training step has backward nodes";
  // AccumulateGrad (one per parameter) has no forward op by design.
  int64_t accumulate = 0;
  for (const Operation& op : trace_->operations()) {
    accumulate += absl::StrContains(op.name(), "AccumulateGrad");
  }
  EXPECT_GE(linked, 0.9 * (nodes - accumulate))
      << linked << " of " << nodes << " nodes linked, " << accumulate << " AccumulateGrad";
  int with_backward = 0;
  for (const Operation& op : trace_->operations()) {
    if (!op.has_backward()) continue;
    ++with_backward;
    EXPECT_FALSE(op.backward().recorded_name().empty()) << op.name();
    // Linked forwards carry the node's sequence number.
    if (op.name() != op.backward().recorded_name()) {
      EXPECT_GE(op.sequence_number(), 0) << op.name();
    }
  }
  EXPECT_GT(with_backward, 0);
}

// Kineto links forward ops to backward nodes itself ("fwdbwd" flow events,
// by sequence number and forward thread); where the trace kept them, our
// links must agree: same number, and each flow's forward end inside an
// operation that got a backward pass.
TEST_P(KinetoFixtureTest, BackwardLinksAgreeWithKinetoFlows) {
  const std::string step = trace_->metadata().at("kineto.iteration");
  double lo = 0, hi = -1;
  std::map<int64_t, double> starts;  // flow id -> forward op ts
  std::vector<std::pair<int64_t, double>> finishes;
  for (const json& e : (*raw_)["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat == "user_annotation" && e.value("name", "") == step) {
      lo = e["ts"].get<double>();
      hi = lo + e["dur"].get<double>();
    } else if (cat == "fwdbwd" && e.value("ph", "") == "s") {
      starts[e["id"].get<int64_t>()] = e["ts"].get<double>();
    } else if (cat == "fwdbwd" && e.value("ph", "") == "f") {
      finishes.emplace_back(e["id"].get<int64_t>(), e["ts"].get<double>());
    }
  }
  if (finishes.empty()) {
    GTEST_SKIP() << "fixture has no fwdbwd flow events to compare with";
  }
  int flows = 0;
  for (const auto& [id, ts] : finishes) {
    auto s = starts.find(id);
    if (ts < lo || ts > hi || s == starts.end() || s->second < lo) continue;
    ++flows;
    const int64_t at = UsToNs(s->second) - UsToNs(lo);
    const Operation* owner = nullptr;
    for (const Operation& op : trace_->operations()) {
      if (op.cpu_start_ns() <= at && at <= op.cpu_start_ns() + op.cpu_duration_ns() &&
          op.name() != op.backward().recorded_name()) {
        owner = &op;
      }
    }
    ASSERT_NE(owner, nullptr) << "flow " << id << " starts in no operation";
    EXPECT_TRUE(owner->has_backward()) << owner->name() << " flow " << id;
  }
  EXPECT_EQ(flows, MetaInt(*trace_, "kineto.backward_nodes_linked"));
}

// Each gradient accumulation follows the backward node that produced its
// gradient (core/trace/gradient_producers.h): a pass with a backward that
// took a tensor of the parameter's shape.
TEST_P(KinetoFixtureTest, EveryGradientFollowsTheBackwardPassThatTookItsParameter) {
  int accumulations = 0, linked = 0, took_shape = 0;
  for (const Operation& op : trace_->operations()) {
    if (op.name() != "torch::autograd::AccumulateGrad") continue;
    ++accumulations;
    if (!op.has_gradient_producer()) continue;
    ++linked;
    const Operation& producer = trace_->operations(static_cast<int>(op.gradient_producer()));
    EXPECT_TRUE(producer.has_backward()) << producer.name();
    EXPECT_NE(producer.name(), op.name());
    if (op.arguments_size() == 0 || !op.arguments(0).has_tensor()) continue;
    for (const habitat::v1::Argument& a : producer.arguments()) {
      if (a.has_tensor() && std::equal(a.tensor().shape().begin(), a.tensor().shape().end(),
                                       op.arguments(0).tensor().shape().begin(),
                                       op.arguments(0).tensor().shape().end())) {
        ++took_shape;
        break;
      }
    }
  }
  ASSERT_GT(accumulations, 0) << "a training step accumulates gradients";
  EXPECT_EQ(linked, accumulations);
  EXPECT_EQ(took_shape, accumulations) << GetParam().name;
}

TEST_P(KinetoFixtureTest, TimesAreRelativeToTheStep) {
  for (const Operation& op : trace_->operations()) {
    EXPECT_GE(op.cpu_start_ns(), 0);
    EXPECT_LE(op.cpu_start_ns(), trace_->iteration_wall_ns());
    for (const auto* pass : {&op.forward(), &op.backward()}) {
      int64_t sum = 0;
      for (const auto& k : pass->kernels()) {
        sum += k.duration_ns();
        ASSERT_TRUE(k.has_launch_time()) << k.name();
        // A kernel starts on the GPU after its launch call began.
        EXPECT_LE(k.launch_ns(), k.start_ns()) << k.name();
        EXPECT_GE(k.launch_ns(), op.cpu_start_ns());
        EXPECT_GT(k.grid().x(), 0u);
        EXPECT_GT(k.registers_per_thread(), 0u);
      }
      for (const auto& m : pass->memory()) sum += m.duration_ns();
      EXPECT_EQ(sum, pass->time_ns());
    }
  }
  EXPECT_EQ(trace_->metadata().at("kineto.clamped_gpu_starts"), "0");
}

// Options, on one real capture (each import takes a while).
// A profile holds no TF32 or autocast settings; the importer infers them
// from kernel names. They must be what the capture script read from torch.
TEST_P(KinetoFixtureTest, InfersTheMathSettingsTheCaptureRan) {
  if (!measured_.is_object()) GTEST_SKIP() << "no measurement for this fixture";
  const json& env = measured_["environment"];
  ASSERT_TRUE(trace_->has_math());
  const habitat::v1::MathSettings& math = trace_->math();
  EXPECT_EQ(math.source(), "inferred");
  const bool bf16 = absl::EndsWith(GetParam().name, "_bf16");
  ASSERT_TRUE(math.has_autocast_dtype());
  EXPECT_EQ(math.autocast_dtype(), bf16 ? "bf16" : "");
  // Only fp32 operations tell the TF32 switches; in the fp32 captures every
  // model with a matmul or convolution shows them.
  bool matmuls = false, convs = false;
  for (const Operation& op : trace_->operations()) {
    const std::string& n = op.name();
    matmuls = matmuls || n == "aten::linear" || n == "aten::addmm" || n == "aten::bmm";
    convs = convs || absl::StartsWith(n, "aten::conv") || n == "aten::lstm";
  }
  if (!bf16) {
    EXPECT_EQ(math.has_matmul_tf32(), matmuls);
    EXPECT_EQ(math.has_cudnn_tf32(), convs);
  }
  if (math.has_matmul_tf32()) {
    EXPECT_EQ(math.matmul_tf32(), env["allow_tf32_matmul"].get<bool>());
    EXPECT_EQ(math.float32_matmul_precision(), env["float32_matmul_precision"]);
  }
  if (math.has_cudnn_tf32()) {
    EXPECT_EQ(math.cudnn_tf32(), env["allow_tf32_cudnn"].get<bool>());
  }
}

TEST(KinetoOptionsTest, StepSelectionAndWallOverride) {
  auto text = ReadFile(std::string(HABITAT_TESTDATA_DIR) + "/kineto/h100/dcgan_b64_fp32.json.gz");
  ASSERT_TRUE(text.ok()) << text.status();
  auto by_default = ImportKinetoTrace(*text, KinetoImportOptions());
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  const std::string step = by_default->metadata().at("kineto.iteration");
  int64_t number = 0;
  ASSERT_TRUE(absl::SimpleAtoi(step.substr(step.find('#') + 1), &number));

  KinetoImportOptions options;
  options.profiler_step = number;
  options.iteration_wall_ns = 123456789;
  auto chosen = ImportKinetoTrace(*text, options);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->iteration_wall_ns(), 123456789);
  // A measured wall time calibrates the profiled timeline: nothing removed.
  EXPECT_EQ(chosen->metadata().at("kineto.host_timeline"), "profiled; wall time given");
  EXPECT_EQ(chosen->metadata().count("kineto.profiler_cost_ns"), 0u);
  EXPECT_EQ(by_default->metadata().at("kineto.host_timeline"), "profiler cost removed");
  ASSERT_EQ(chosen->operations_size(), by_default->operations_size());
  const int last = chosen->operations_size() - 1;
  EXPECT_GT(chosen->operations(last).cpu_start_ns(), by_default->operations(last).cpu_start_ns());
  EXPECT_EQ(chosen->operations_size(), by_default->operations_size());
  EXPECT_EQ(chosen->iteration_gpu_busy_ns(), by_default->iteration_gpu_busy_ns());
  EXPECT_FALSE(by_default->has_memory());  // profiled without profile_memory

  // The capture kept one step's events; the other steps' annotations remain
  // and hold no GPU work, which must be said rather than imported as empty.
  options.profiler_step = number - 1;
  auto other = ImportKinetoTrace(*text, options);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(other.status().message()),
              ::testing::HasSubstr(absl::StrCat("no GPU work was launched in "
                                                "ProfilerStep#",
                                                number - 1)));

  // A real trace cut short (interrupted download) is an error, not a crash.
  auto cut = ImportKinetoTrace(text->substr(0, text->size() / 2), options);
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cut.status().message()), ::testing::HasSubstr("not valid JSON"));
}

// tests/testdata/kineto/memory_events.json: two steps of a hand-made
// profile_memory=True profile; in step 2 GPU 0's totals peak at 3 MiB
// allocated and 4 MiB reserved, a CPU and a GPU 1 event are larger.
absl::StatusOr<Trace> ImportMemoryFixture(std::optional<int64_t> step) {
  auto text = ReadFile(std::string(HABITAT_TESTDATA_DIR) + "/kineto/memory_events.json");
  if (!text.ok()) return text.status();
  KinetoImportOptions options;
  options.batch_size = 64;
  options.profiler_step = step;
  return ImportKinetoTrace(*text, options);
}

TEST(KinetoMemoryTest, PeaksOfTheIterationsGpuMemoryEvents) {
  auto trace = ImportMemoryFixture(std::nullopt);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->metadata().at("kineto.iteration"), "ProfilerStep#2");
  ASSERT_TRUE(trace->has_memory());
  const habitat::v1::MemoryUsage& m = trace->memory();
  EXPECT_EQ(m.source(), "kineto");
  EXPECT_EQ(m.peak_allocated_bytes(), 3 << 20);
  EXPECT_EQ(m.peak_reserved_bytes(), 4 << 20);
  // The first event's total less what it allocated.
  EXPECT_EQ(m.allocated_bytes_at_start(), 1 << 20);
  EXPECT_TRUE(ValidateTrace(*trace).ok()) << ValidateTrace(*trace);
}

TEST(KinetoMemoryTest, OnlyTheChosenStepCounts) {
  auto trace = ImportMemoryFixture(1);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_TRUE(trace->has_memory());
  EXPECT_EQ(trace->memory().peak_allocated_bytes(), 5 << 20);
  EXPECT_EQ(trace->memory().peak_reserved_bytes(), 6 << 20);
  EXPECT_EQ(trace->memory().allocated_bytes_at_start(), 4 << 20);
}

// tests/testdata/kineto_memory/h100/: real profile_memory=True profiles of
// one training step on an H100 (eval/capture/capture_kineto_memory.py),
// with torch's own allocator statistics of that step in measurements.json:
// the import must read the same three numbers from the [memory] events.
class KinetoRealMemoryTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KinetoRealMemoryTest, MatchesTorchsAllocatorStatistics) {
  const std::string dir = std::string(HABITAT_TESTDATA_DIR) + "/kineto_memory/h100/";
  auto measurements = ReadFile(dir + "measurements.json");
  ASSERT_TRUE(measurements.ok()) << measurements.status();
  const json measured = json::parse(*measurements, nullptr, false)["cases"][GetParam()];
  ASSERT_TRUE(measured.is_object()) << GetParam() << " not in measurements.json";
  auto text = ReadFile(dir + GetParam() + ".json.gz");
  ASSERT_TRUE(text.ok()) << text.status();
  KinetoImportOptions options;
  options.precision = PrecisionOf(GetParam());
  auto trace = ImportKinetoTrace(*text, options);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_TRUE(trace->has_memory());
  EXPECT_EQ(trace->memory().allocated_bytes_at_start(),
            measured["allocated_bytes_at_start"].get<int64_t>());
  EXPECT_EQ(trace->memory().peak_allocated_bytes(),
            measured["peak_allocated_bytes"].get<int64_t>());
  EXPECT_EQ(trace->memory().peak_reserved_bytes(), measured["peak_reserved_bytes"].get<int64_t>());
}

INSTANTIATE_TEST_SUITE_P(H100, KinetoRealMemoryTest,
                         ::testing::Values("resnet50_b16_fp32", "gpt2_b4_bf16"));

std::string FixtureName(const ::testing::TestParamInfo<Fixture>& info) {
  std::string s = info.param.gpu + "_" + info.param.name;
  for (char& c : s) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Committed, KinetoFixtureTest, ::testing::ValuesIn(ListFixtures()),
                         FixtureName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(KinetoFixtureTest);

}  // namespace
}  // namespace habitat
