#include "agent/capture/kernel_counters.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "agent/capture/fake_counter_source.h"
#include "gtest/gtest.h"

namespace habitat {
namespace agent {
namespace {

const std::vector<std::string> kMetrics = {
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
};

// Values whose dram_read_bytes is `id`, so a joined range is recognisable.
std::vector<double> Values(double id) { return {id, 2 * id, 1, 2, 3, 0}; }

KernelRecord K(const std::string& name, uint32_t correlation, int64_t ns, uint32_t grid_x = 1) {
  KernelRecord k;
  k.name = name;
  k.grid = {grid_x, 1, 1};
  k.block = {128, 1, 1};
  k.start_ns = 1000 * correlation;
  k.end_ns = k.start_ns + ns;
  k.correlation_id = correlation;
  return k;
}

std::set<KernelKey> AllKeys(const std::vector<KernelRecord>& ks) {
  std::set<KernelKey> out;
  for (const KernelRecord& k : ks) out.insert(KeyOf(k));
  return out;
}

TEST(CountersFromMetrics, FlopsAreAddPlusMulPlusTwiceFma) {
  const std::vector<std::string> names = {"dram__bytes_read.sum",
                                          "dram__bytes_write.sum",
                                          "sm__sass_thread_inst_executed_op_dadd_pred_on.sum",
                                          "sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
                                          "sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
                                          "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
                                          "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
                                          "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
                                          "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
                                          "sm__sass_thread_inst_executed_op_hmul_pred_on.sum",
                                          "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
                                          "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
                                          "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
                                          "some__other_metric.sum"};
  const std::vector<double> values = {4096.4, 1024, 1,   2,   3,    10,  20,
                                      30,     100,  200, 300, 1000, 500, 9999};
  KernelCounters c;
  ASSERT_TRUE(CountersFromMetrics(names, values, &c).ok());
  EXPECT_EQ(c.dram_read_bytes, 4096u);
  EXPECT_EQ(c.dram_write_bytes, 1024u);
  EXPECT_EQ(c.flop_fp64, 1u + 2u + 2u * 3u);
  EXPECT_EQ(c.flop_fp32, 10u + 20u + 2u * 30u);
  EXPECT_EQ(c.flop_fp16, 100u + 200u + 2u * 300u);
  EXPECT_EQ(c.flop_bf16, 0u);
  EXPECT_EQ(c.flop_tensor, 1000u + 500u);
}

TEST(CountersFromMetrics, SubpartitionSpellingCountsTheSame) {
  KernelCounters c;
  ASSERT_TRUE(
      CountersFromMetrics({"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"}, {5}, &c).ok());
  EXPECT_EQ(c.flop_fp32, 10u);
}

TEST(CountersFromMetrics, NoiseIsZeroAndMismatchIsAnError) {
  KernelCounters c;
  ASSERT_TRUE(CountersFromMetrics({"dram__bytes_read.sum", "dram__bytes_write.sum"},
                                  {-3.0, std::numeric_limits<double>::quiet_NaN()}, &c)
                  .ok());
  EXPECT_EQ(c.dram_read_bytes, 0u);
  EXPECT_EQ(c.dram_write_bytes, 0u);
  const Status s = CountersFromMetrics({"dram__bytes_read.sum"}, {}, &c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("0 values for 1 metrics"), std::string::npos);
}

TEST(CounterMetrics, ScalarAndTensorNames) {
  const std::vector<std::string> scalar = ScalarCounterMetrics();
  ASSERT_EQ(scalar.size(), 11u);
  EXPECT_EQ(scalar[0], "dram__bytes_read.sum");
  EXPECT_EQ(scalar[1], "dram__bytes_write.sum");
  // Sparse variants, per-instruction duplicates, integer types and
  // aggregates of kept leaves are left out.
  EXPECT_EQ(
      TensorCounterMetrics(
          {"sm__ops_path_tensor_src_fp16_dst_fp32",
           "sm__ops_path_tensor_src_fp16_dst_fp32_sparsity_on", "sm__inst_executed_pipe_tensor",
           "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32", "sm__ops_path_tensor_src_int8",
           "sm__ops_path_tensor_src_fp16", "sm__ops_path_tensor_src_fp16_dst_fp16",
           "sm__ops_path_tensor_src_fp64", "sm__ops_path_tensor_src_bf16_dst_fp32"}),
      (std::vector<std::string>{
          "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16_dst_fp16.sum",
          "sm__ops_path_tensor_src_fp16_dst_fp32.sum", "sm__ops_path_tensor_src_fp64.sum"}));
}

TEST(TopKernelKeys, TakesLongestKeysUpToTheFraction) {
  // gemm: 3 x 300 = 900, conv: 95, tiny: 5 (total 1000).
  const std::vector<KernelRecord> ks = {K("gemm", 1, 300), K("conv", 2, 95), K("gemm", 3, 300),
                                        K("tiny", 4, 5), K("gemm", 5, 300)};
  std::set<KernelKey> keys;
  ASSERT_TRUE(TopKernelKeys(ks, 0.995, &keys).ok());
  EXPECT_EQ(keys.size(), 2u);  // 995 of 1000 reached without "tiny"
  EXPECT_EQ(keys.count(KeyOf(ks[0])), 1u);
  EXPECT_EQ(keys.count(KeyOf(ks[1])), 1u);
  ASSERT_TRUE(TopKernelKeys(ks, 0.5, &keys).ok());
  EXPECT_EQ(keys.size(), 1u);
  ASSERT_TRUE(TopKernelKeys(ks, 1.0, &keys).ok());
  EXPECT_EQ(keys.size(), 3u);
  // The launch configuration is part of the key.
  ASSERT_TRUE(TopKernelKeys({K("gemm", 1, 10, 4), K("gemm", 2, 10, 8)}, 1.0, &keys).ok());
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_EQ(TopKernelKeys(ks, 0.0, &keys).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TopKernelKeys(ks, 1.5, &keys).code(), StatusCode::kInvalidArgument);
}

TEST(JoinCounters, SameSequenceJoinsInOrderAndMeasuresRepeatsOnce) {
  // Given out of order: the join orders by correlation id.
  const std::vector<KernelRecord> ks = {K("b", 2, 10), K("a", 1, 10), K("a", 3, 10), K("c", 4, 10)};
  CounterPass pass;
  pass.metric_names = kMetrics;
  pass.ranges = {{"a", Values(1)}, {"b", Values(2)}, {"a", Values(3)}, {"c", Values(4)}};
  CounterCache cache;
  JoinStats stats;
  ASSERT_TRUE(JoinCounters(ks, pass, AllKeys(ks), &cache, &stats).ok());
  EXPECT_EQ(stats.matched, 4u);
  EXPECT_EQ(stats.new_keys, 3u);
  EXPECT_EQ(stats.wanted_missing, 0u);
  EXPECT_FALSE(stats.by_position);
  ASSERT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.at(KeyOf(ks[1])).dram_read_bytes, 1u);  // first "a" kept
  EXPECT_EQ(cache.at(KeyOf(ks[0])).dram_read_bytes, 2u);
  EXPECT_EQ(cache.at(KeyOf(ks[3])).dram_read_bytes, 4u);
  EXPECT_EQ(cache.at(KeyOf(ks[3])).dram_write_bytes, 8u);
  EXPECT_EQ(cache.at(KeyOf(ks[3])).flop_fp32, 1u + 2u + 6u);
}

TEST(JoinCounters, ResynchronisesAroundKernelsOnlyOneRunLaunched) {
  const std::vector<KernelRecord> ks = {K("a", 1, 10), K("extra", 2, 10), K("b", 3, 10),
                                        K("c", 4, 10), K("d", 5, 10)};
  CounterPass pass;
  pass.metric_names = kMetrics;
  // The counter run missed "extra" and launched a "new" one before "c".
  pass.ranges = {
      {"a", Values(1)}, {"b", Values(2)}, {"new", Values(9)}, {"c", Values(3)}, {"d", Values(4)}};
  CounterCache cache;
  JoinStats stats;
  ASSERT_TRUE(JoinCounters(ks, pass, AllKeys(ks), &cache, &stats).ok());
  EXPECT_EQ(stats.matched, 4u);
  EXPECT_EQ(stats.skipped_kernels, 1u);
  EXPECT_EQ(stats.skipped_ranges, 1u);
  EXPECT_EQ(stats.wanted_missing, 1u);  // "extra"
  EXPECT_EQ(cache.at(KeyOf(ks[2])).dram_read_bytes, 2u);
  EXPECT_EQ(cache.at(KeyOf(ks[3])).dram_read_bytes, 3u);
  EXPECT_EQ(cache.at(KeyOf(ks[4])).dram_read_bytes, 4u);
  EXPECT_EQ(cache.count(KeyOf(ks[1])), 0u);
}

TEST(JoinCounters, OnlyWantedKeysAndNoOverwrite) {
  const std::vector<KernelRecord> ks = {K("a", 1, 10), K("b", 2, 10)};
  CounterPass pass;
  pass.metric_names = kMetrics;
  pass.ranges = {{"a", Values(1)}, {"b", Values(2)}};
  CounterCache cache;
  cache[KeyOf(ks[0])].dram_read_bytes = 77;  // measured earlier
  JoinStats stats;
  ASSERT_TRUE(JoinCounters(ks, pass, {KeyOf(ks[0])}, &cache, &stats).ok());
  EXPECT_EQ(stats.new_keys, 0u);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.at(KeyOf(ks[0])).dram_read_bytes, 77u);
}

TEST(JoinCounters, ByPositionWhenNoNameMatchesButCountsAgree) {
  const std::vector<KernelRecord> ks = {K("a", 1, 10), K("b", 2, 10)};
  CounterPass pass;
  pass.metric_names = kMetrics;
  pass.ranges = {{"0", Values(1)}, {"1", Values(2)}};
  CounterCache cache;
  JoinStats stats;
  ASSERT_TRUE(JoinCounters(ks, pass, AllKeys(ks), &cache, &stats).ok());
  EXPECT_TRUE(stats.by_position);
  EXPECT_EQ(cache.at(KeyOf(ks[1])).dram_read_bytes, 2u);
  // Different counts: nothing is joined.
  pass.ranges.pop_back();
  cache.clear();
  ASSERT_TRUE(JoinCounters(ks, pass, AllKeys(ks), &cache, &stats).ok());
  EXPECT_FALSE(stats.by_position);
  EXPECT_TRUE(cache.empty());
}

TEST(CollectKernelCounters, RunsOnceThenServesFromTheCache) {
  const std::vector<KernelRecord> ks = {K("gemm", 1, 900), K("relu", 2, 100)};
  FakeCounterSource source(kMetrics);
  source.AddRange("gemm", Values(5));
  source.AddRange("relu", Values(6));
  int runs = 0;
  auto work = [&runs]() {
    ++runs;
    return Status::Ok();
  };
  CounterCache cache;
  CounterReport report;
  ASSERT_TRUE(CollectKernelCounters(ks, 0.995, &source, work, &cache, &report).ok());
  EXPECT_TRUE(report.ran);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(report.wanted_keys, 2u);
  EXPECT_EQ(report.join.new_keys, 2u);
  EXPECT_EQ(source.last_max_kernels(), 2u + 0u + 64u);
  // Everything wanted is cached: no second pass.
  ASSERT_TRUE(CollectKernelCounters(ks, 0.995, &source, work, &cache, &report).ok());
  EXPECT_FALSE(report.ran);
  EXPECT_EQ(report.cached_before, 2u);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(source.collections(), 1);
}

TEST(CollectKernelCounters, ErrorsLeaveTheCacheAlone) {
  const std::vector<KernelRecord> ks = {K("gemm", 1, 900)};
  FakeCounterSource source(kMetrics);
  source.AddRange("gemm", Values(5));
  CounterCache cache;
  CounterReport report;
  auto failing = []() { return InternalError("train_step raised"); };
  Status s = CollectKernelCounters(ks, 0.995, &source, failing, &cache, &report);
  EXPECT_EQ(s.message(), "train_step raised");
  EXPECT_TRUE(cache.empty());
  source.FailWith(PermissionDeniedError("no profiling permission"));
  s = CollectKernelCounters(
      ks, 0.995, &source, [] { return Status::Ok(); }, &cache, &report);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(cache.empty());
}

TEST(AttachCounters, SetsMatchingKernelsOfTheTrace) {
  Trace t;
  Operation op;
  Kernel gemm;
  gemm.name = "gemm";
  gemm.grid = {4, 1, 1};
  gemm.block = {128, 1, 1};
  Kernel other = gemm;
  other.grid = {8, 1, 1};  // another launch configuration
  op.forward.kernels = {gemm, other};
  op.backward = Pass();
  op.backward->kernels = {gemm};
  t.operations.push_back(op);
  t.unattributed_kernels = {gemm};
  CounterCache cache;
  cache[KeyOf(gemm)].flop_tensor = 1234;
  EXPECT_EQ(AttachCounters(cache, &t), 3u);
  const Operation& o = t.operations[0];
  ASSERT_TRUE(o.forward.kernels[0].counters.has_value());
  EXPECT_EQ(o.forward.kernels[0].counters->flop_tensor, 1234u);
  EXPECT_FALSE(o.forward.kernels[1].counters.has_value());
  EXPECT_TRUE(o.backward->kernels[0].counters.has_value());
  EXPECT_TRUE(t.unattributed_kernels[0].counters.has_value());
}

}  // namespace
}  // namespace agent
}  // namespace habitat
