// The profiler-cost estimate (core/kineto/profiler_cost.h) on a made-up
// step whose events are placed by hand, and the importer on real captures
// changed so that the estimate cannot be made. The fixtures' accuracy
// against their unprofiled wall times is in profiled_wall_test.cc.
#include "core/kineto/profiler_cost.h"

#include <cmath>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "common/file_io.h"
#include "core/kineto/kineto_events.h"
#include "core/kineto/kineto_import.h"
#include "core/kineto/kineto_structure.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace kineto {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json Event(const std::string& cat, const std::string& name, double ts, double dur, json args,
           int tid = 1) {
  return json{{"ph", "X"},  {"cat", cat}, {"name", name}, {"pid", tid == 0 ? 0 : 1},
              {"tid", tid}, {"ts", ts},   {"dur", dur},   {"args", std::move(args)}};
}

// ProfilerStep#1 over [0, 1000] us: `linears` times an aten::linear (at
// 30 us intervals) holding aten::t (2 us) and, 2 us after it, aten::addmm
// (4 us), which launches a 1 us kernel with a 1 us cudaLaunchKernel;
// cudaGetErrorString after each linear; a cudaDeviceSynchronize at the end.
json MadeUpStep(int linears, bool record_shapes = true) {
  json events = json::array();
  events.push_back(Event("user_annotation", "ProfilerStep#1", 0, 1000, json::object()));
  const json shapes = {{"Input Dims", json::array({json::array({8, 8})})},
                       {"Input type", json::array({"float"})}};
  int correlation = 1;
  for (int i = 0; i < linears; ++i) {
    const double t = 10 + 30.0 * i;
    events.push_back(Event("cpu_op", "aten::linear", t, 12, shapes));
    events.push_back(Event("cpu_op", "aten::t", t + 1, 2, shapes));
    events.push_back(Event("cpu_op", "aten::addmm", t + 5, 4, shapes));
    events.push_back(
        Event("cuda_runtime", "cudaLaunchKernel", t + 6, 1, json{{"correlation", correlation}}));
    events.push_back(Event("kernel", "gemm", t + 8, 1,
                           json{{"correlation", correlation},
                                {"stream", 7},
                                {"device", 0},
                                {"grid", {1, 1, 1}},
                                {"block", {128, 1, 1}},
                                {"registers per thread", 32},
                                {"shared memory", 0}},
                           7));
    ++correlation;
    events.push_back(Event("cuda_runtime", "cudaGetErrorString", t + 13, 0.1,
                           json{{"correlation", correlation++}}));
  }
  events.push_back(
      Event("cuda_runtime", "cudaDeviceSynchronize", 990, 5, json{{"correlation", correlation++}}));
  json doc = {{"deviceProperties", json::array({{{"id", 0}, {"name", "GPU"}, {"numSms", 1}}})},
              {"traceEvents", std::move(events)}};
  doc["record_shapes"] = record_shapes ? 1 : 0;
  return doc;
}

struct Parsed {
  std::unique_ptr<ParsedTrace> trace;
  std::unique_ptr<OpForest> forest;
  std::unique_ptr<LaunchIndex> launches;
};

Parsed Parse(const json& doc) {
  Parsed p;
  auto parsed = ParseKinetoTrace(doc.dump());
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  p.trace = *std::move(parsed);
  p.forest = std::make_unique<OpForest>(*p.trace);
  p.launches = std::make_unique<LaunchIndex>(*p.trace);
  return p;
}

TEST(ProfilerCostTest, CountsEventsInSiblingGaps) {
  const Parsed p = Parse(MadeUpStep(30));
  const ProfilerCost cost = EstimateProfilerCost(*p.trace, *p.forest, *p.launches, 0, 1'000'000);
  ASSERT_TRUE(cost.estimated()) << cost.not_estimated();
  EXPECT_EQ(cost.sibling_pairs(), 30);      // aten::t, aten::addmm in each linear
  EXPECT_EQ(cost.sibling_gap_ns(), 2'000);  // t + 1 + 2 -> t + 5
  EXPECT_EQ(cost.cpu_ops(), 90);
  EXPECT_EQ(cost.launches(), 30);
  EXPECT_EQ(cost.runtime_calls(), 31);  // cudaGetErrorString and the synchronize
  const ProfilerCostModel& m = kProfilerCostModel;
  const double expected = 2'000 * (90 * m.per_cpu_op + 30 * m.per_launch + 31 * m.per_runtime_call);
  EXPECT_NEAR(cost.estimated_ns(), expected, 200);
  // Sparse events: all of it comes out, by the end of the step.
  EXPECT_EQ(cost.removed_ns(), cost.estimated_ns());
  EXPECT_EQ(cost.Corrected(1'000'000), 1'000'000 - cost.removed_ns());
  EXPECT_EQ(cost.Corrected(0), 0);
  // Nothing comes out before the first event; the first linear's events
  // (three ops, a launch, a call) are out by the second's start.
  EXPECT_EQ(cost.Corrected(10'000), 10'000);
  EXPECT_EQ(cost.Corrected(40'000), 40'000 - std::llround(2'000 * m.per_cpu_op) * 3 -
                                        std::llround(2'000 * m.per_launch) -
                                        std::llround(2'000 * m.per_runtime_call));
}

TEST(ProfilerCostTest, TheCorrectedClockNeverRunsBackwards) {
  // Events closer together than their estimated cost: what does not fit
  // between two is carried to the next, never taken out of time not there.
  ProfilerCostModel costly;
  costly.per_cpu_op = 20;  // 40 us an op, at 30 us a linear of three ops
  const Parsed p = Parse(MadeUpStep(30));
  const ProfilerCost cost =
      EstimateProfilerCost(*p.trace, *p.forest, *p.launches, 0, 1'000'000, costly);
  ASSERT_TRUE(cost.estimated());
  EXPECT_GT(cost.estimated_ns(), 1'000'000);
  EXPECT_LT(cost.removed_ns(), 1'000'000);
  Nanoseconds previous = cost.Corrected(0);
  for (Nanoseconds t = 0; t <= 1'000'000; t += 250) {
    const Nanoseconds now = cost.Corrected(t);
    ASSERT_GE(now, previous) << t;
    ASSERT_LE(now, t);
    ASSERT_GE(now, 0);
    previous = now;
  }
}

TEST(ProfilerCostTest, ImportRemovesItAndReplaysTheOrigin) {
  auto trace = ImportKinetoTrace(MadeUpStep(30).dump(), KinetoImportOptions());
  ASSERT_TRUE(trace.ok()) << trace.status();
  const auto& meta = trace->metadata();
  EXPECT_EQ(meta.at("kineto.host_timeline"), "profiler cost removed");
  EXPECT_EQ(meta.at("kineto.profiled_step_ns"), "1000000");
  EXPECT_EQ(meta.at("kineto.sibling_gap_ns"), "2000");
  EXPECT_EQ(meta.at("kineto.profiler_cost_events"),
            "90 cpu_ops, 30 launches, 31 other runtime calls");
  int64_t removed = 0;
  ASSERT_TRUE(absl::SimpleAtoi(meta.at("kineto.profiler_cost_ns"), &removed));
  EXPECT_GT(removed, 0);
  // The host ran the last linear and reached the synchronize `removed`
  // earlier; the GPU had nothing left, so the step ends that much earlier.
  // (The synchronize's own 5 us may go too: the replay compares its
  // corrected start with the GPU's recorded, uncorrected, end.)
  EXPECT_GE(trace->iteration_wall_ns(), 990'000 - removed - 1'000);
  EXPECT_LE(trace->iteration_wall_ns(), 995'000 - removed);
  const auto& last = trace->operations(trace->operations_size() - 1);
  EXPECT_LT(last.cpu_start_ns(), 10'000 + 29 * 30'000);
  ASSERT_EQ(trace->host_events_size(), 1);
  // The synchronize's own cost comes out of its 5 us.
  EXPECT_EQ(trace->host_events(0).cpu_duration_ns(),
            5'000 - std::llround(2'000 * kProfilerCostModel.per_runtime_call));
}

TEST(ProfilerCostTest, WithoutRecordShapesTheTimelineStaysProfiled) {
  auto trace =
      ImportKinetoTrace(MadeUpStep(30, /*record_shapes=*/false).dump(), KinetoImportOptions());
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->metadata().at("kineto.host_timeline"), "profiled");
  EXPECT_THAT(trace->metadata().at("kineto.host_timeline_why"), HasSubstr("record_shapes=True"));
  EXPECT_EQ(trace->iteration_wall_ns(), 1'000'000);
  EXPECT_EQ(trace->operations(1).cpu_start_ns(), 40'000);
}

TEST(ProfilerCostTest, TooFewNestedOpsToMeasureTheHostBy) {
  auto trace = ImportKinetoTrace(MadeUpStep(kMinSiblingPairs - 1).dump(), KinetoImportOptions());
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->metadata().at("kineto.host_timeline"), "profiled");
  EXPECT_THAT(trace->metadata().at("kineto.host_timeline_why"),
              HasSubstr("19 pairs of consecutive ops nested in one op"));
}

// A real capture (H200, GPT-2 small, batch 8, bf16) changed one way.
absl::StatusOr<habitat::v1::Trace> ImportChanged(void (*change)(json*)) {
  auto text = ReadFile(std::string(HABITAT_TESTDATA_DIR) + "/kineto/h200/gpt2_b8_bf16.json.gz");
  if (!text.ok()) return text.status();
  json doc = json::parse(*text);
  change(&doc);
  return ImportKinetoTrace(doc.dump(), KinetoImportOptions());
}

TEST(ProfilerCostTest, RealCaptureWithoutShapesOrWithPythonStacks) {
  auto as_is = ImportChanged([](json*) {});
  ASSERT_TRUE(as_is.ok()) << as_is.status();
  EXPECT_EQ(as_is->metadata().at("kineto.host_timeline"), "profiler cost removed");

  auto no_shapes = ImportChanged([](json* doc) {
    (*doc)["record_shapes"] = 0;
    for (json& e : (*doc)["traceEvents"]) {
      if (!e.contains("args")) continue;
      for (const char* key : {"Input Dims", "Input type", "Input Strides", "Concrete Inputs"}) {
        e["args"].erase(key);
      }
    }
  });
  ASSERT_TRUE(no_shapes.ok()) << no_shapes.status();
  EXPECT_EQ(no_shapes->metadata().at("kineto.host_timeline"), "profiled");
  EXPECT_THAT(no_shapes->metadata().at("kineto.host_timeline_why"),
              HasSubstr("without record_shapes=True"));
  EXPECT_EQ(no_shapes->iteration_wall_ns(),
            std::stoll(as_is->metadata().at("kineto.profiled_step_ns")));

  auto stacks = ImportChanged([](json* doc) {
    (*doc)["traceEvents"].push_back({{"ph", "X"},
                                     {"cat", "python_function"},
                                     {"name", "train.py(12): step"},
                                     {"pid", 1},
                                     {"tid", 1},
                                     {"ts", 0},
                                     {"dur", 1},
                                     {"args", json::object()}});
  });
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(stacks->metadata().at("kineto.host_timeline"), "profiled");
  EXPECT_THAT(stacks->metadata().at("kineto.host_timeline_why"), HasSubstr("with_stack=True"));
}

}  // namespace
}  // namespace kineto
}  // namespace habitat
