// FSDP steps and memory read from a real GPT-2 iteration (H100,
// tests/testdata/agent_suite/h100_memory), and the configurations no model
// represents.
#include "core/predict/fsdp_prediction.h"

#include <memory>
#include <string>

#include "core/devices/device_database.h"
#include "core/parallel/fsdp_timeline.h"
#include "core/predict/ddp_prediction.h"
#include "core/predict/prediction_engine.h"
#include "core/pricing/price_catalog.h"
#include "core/testing/trace_fixtures.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

namespace v1 = habitat::v1;
using ::testing::HasSubstr;

TEST(ModelledParallelismTest, OnlyDdpAndFsdpWithoutOffloadAreModelled) {
  v1::ParallelConfig config;
  EXPECT_TRUE(CheckModelledParallelism(config).ok());
  config.set_kind(v1::ParallelConfig::KIND_FULLY_SHARDED);
  EXPECT_TRUE(CheckModelledParallelism(config).ok());
  config.set_cpu_offload(true);
  EXPECT_THAT(CheckModelledParallelism(config).message(), HasSubstr("CPU offload"));
  config.set_cpu_offload(false);
  config.set_kind(v1::ParallelConfig::KIND_HYBRID_SHARDED);
  EXPECT_THAT(CheckModelledParallelism(config).message(), HasSubstr("hybrid sharding"));
  for (v1::ParallelConfig::Kind kind :
       {v1::ParallelConfig::KIND_TENSOR_PARALLEL, v1::ParallelConfig::KIND_PIPELINE_PARALLEL}) {
    config.set_kind(kind);
    const absl::Status s = CheckModelledParallelism(config);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("not modelled"));
  }
}

TEST(FsdpMemoryTest, StateAndParameterSizedWorkAreShardedActivationsAreNot) {
  MemoryModel model;
  model.start_bytes = 800;
  model.traced_batch = 8;
  model.candidates = {{400, 1000}, {1600, 100}};
  // 800 / 4 + max(400 / 4 + 1000, 1600 / 4 + 100) + 50 in flight.
  EXPECT_EQ(FsdpPeakBytesPerGpu(model, 8, 4, 50), 200 + 1100 + 50);
  // Twice the batch doubles the activations.
  EXPECT_EQ(FsdpPeakBytesPerGpu(model, 16, 4, 50), 200 + 2100 + 50);
  // On one GPU the parameter-sized candidate is the higher.
  EXPECT_EQ(FsdpPeakBytesPerGpu(model, 8, 1, 0), 800 + 1700);
}

TEST(FsdpMemoryTest, AutocastCopiesOfTheGatheredWeightsAreNotSharded) {
  MemoryModel model;
  model.start_bytes = 800;
  model.traced_batch = 8;
  // 400 of the 1600 fixed bytes are autocast's weight copies.
  model.candidates = {{1600, 100, 400}};
  // 800 / 4 + (1200 / 4 + 400 + 100).
  EXPECT_EQ(FsdpPeakBytesPerGpu(model, 8, 4, 0), 200 + 300 + 400 + 100);
  EXPECT_EQ(FsdpPeakBytesPerGpu(model, 8, 1, 0), 800 + 1600 + 100);
}

// A fit with FSDP on four GPUs: the batches that fit are a prefix of the
// grid, the fewest GPUs is the first power of two the smallest batch fits,
// and a GPU that holds the sharded state but not one batch's activations
// says that checkpointing them is what is missing.
TEST(FsdpFitTest, LargestBatchFewestGpusAndCheckpointing) {
  MemoryModel model;
  model.start_bytes = 8000;
  model.traced_batch = 8;
  model.candidates = {{4000, 1000}};
  const int64_t in_flight = 500;
  // Per GPU on 4: 2000 + 1000 + 500 of state, and the activations.
  const int64_t usable = 8000;
  const FsdpFit fit = FitFsdp(model, usable, 0, 4, in_flight);
  ASSERT_GT(fit.largest_batch, 0u);
  EXPECT_TRUE(FsdpFitsMemory(model, fit.largest_batch, 4, in_flight, usable));
  EXPECT_FALSE(FsdpFitsMemory(model, 2 * fit.largest_batch, 4, in_flight, usable));
  EXPECT_FALSE(fit.needs_activation_checkpointing);
  // One GPU holds 8000 + 4000 of state alone; two hold 4000 + 2000 + 500.
  EXPECT_EQ(fit.fewest_gpus, 2u);
  EXPECT_EQ(FitFsdp(model, usable, 0, 1, in_flight).largest_batch, 0u);

  // 3600 holds the state on 4 (3500) but not batch 1's activations.
  const FsdpFit tight = FitFsdp(model, 3600, 0, 4, in_flight);
  EXPECT_EQ(tight.largest_batch, 0u);
  EXPECT_EQ(tight.fewest_gpus, 0u);
  EXPECT_TRUE(tight.needs_activation_checkpointing);
  // 3000 does not hold even the state.
  EXPECT_FALSE(FitFsdp(model, 3000, 0, 4, in_flight).needs_activation_checkpointing);
  // On the fit's grid (multiples of 3).
  EXPECT_EQ(FitFsdp(model, usable, 3, 4, in_flight).largest_batch % 3, 0u);
}

class FsdpEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices =
        DeviceDatabase::LoadFromFile(std::string(HABITAT_DATA_DIR) + "/devices.textproto");
    ASSERT_TRUE(devices.ok()) << devices.status();
    devices_ = std::make_unique<DeviceDatabase>(*std::move(devices));
    auto trace = testing::LoadAgentFixture("h100_memory", "gpt2_b8_fp32");
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = *std::move(trace);
  }

  // One H100 prediction with the given configurations.
  v1::DevicePrediction OnH100(const std::vector<v1::ParallelConfig>& configs) {
    PredictionEngine engine(devices_.get(), nullptr);
    PredictionQuery query;
    query.devices = {"H100-SXM"};
    query.parallel = configs;
    auto response = engine.Predict(trace_, "", query);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok() || response->predictions_size() != 1) return {};
    return response->predictions(0);
  }

  // `trace` on two H200s with FSDP in `units` units (0: the default), or
  // wrapping `wrap`.
  absl::StatusOr<v1::PredictResponse> OnTwoH200s(const v1::Trace& trace, uint32_t units,
                                                 bool fit = false, const std::string& wrap = "") {
    PredictionEngine engine(devices_.get(), nullptr);
    PredictionQuery query;
    query.devices = {"H200"};
    v1::ParallelConfig config = Config(2, v1::ParallelConfig::KIND_FULLY_SHARDED);
    config.set_fsdp_units(units);
    config.set_fsdp_wrap(wrap);
    query.parallel = {config};
    if (fit) query.fit.emplace();
    return engine.Predict(trace, "", query);
  }

  static v1::ParallelConfig Config(uint32_t gpus, v1::ParallelConfig::Kind kind) {
    v1::ParallelConfig config;
    config.set_gpus_per_node(gpus);
    config.set_kind(kind);
    return config;
  }

  std::unique_ptr<DeviceDatabase> devices_;
  v1::Trace trace_;
};

TEST_F(FsdpEngineTest, FourH100sHoldLessPerGpuThanDdpAndComputeBoundsTheStep) {
  const v1::DevicePrediction p = OnH100({Config(4, v1::ParallelConfig::KIND_DATA_PARALLEL),
                                         Config(4, v1::ParallelConfig::KIND_FULLY_SHARDED),
                                         Config(8, v1::ParallelConfig::KIND_FULLY_SHARDED)});
  ASSERT_EQ(p.parallel_size(), 3);
  ASSERT_TRUE(p.has_memory());
  const v1::ParallelPrediction& ddp = p.parallel(0);
  const v1::ParallelPrediction& fsdp = p.parallel(1);
  const v1::ParallelPrediction& fsdp8 = p.parallel(2);
  ASSERT_TRUE(ddp.unavailable().empty()) << ddp.unavailable();
  ASSERT_TRUE(fsdp.unavailable().empty()) << fsdp.unavailable();
  EXPECT_EQ(ddp.kind(), v1::ParallelConfig::KIND_DATA_PARALLEL);
  EXPECT_EQ(fsdp.kind(), v1::ParallelConfig::KIND_FULLY_SHARDED);
  EXPECT_EQ(ddp.peak_memory_bytes_per_gpu(), 0);  // DDP's is DevicePrediction.memory
  EXPECT_EQ(fsdp.buckets(), 0u);
  EXPECT_GT(fsdp.fsdp_units(), 1u);
  EXPECT_LE(fsdp.fsdp_units(), static_cast<uint32_t>(kDefaultFsdpUnits));
  // Each GPU holds a quarter of the state, not the whole model.
  EXPECT_GT(fsdp.peak_memory_bytes_per_gpu(), 0);
  EXPECT_LT(fsdp.peak_memory_bytes_per_gpu(), p.memory().peak_allocated_bytes());
  EXPECT_LT(fsdp8.peak_memory_bytes_per_gpu(), fsdp.peak_memory_bytes_per_gpu());
  // GPT-2's 124M fp32 parameters: about 0.5 GB, two units of them in flight.
  EXPECT_GT(fsdp.unsharded_in_flight_bytes(), 0);
  EXPECT_LT(fsdp.unsharded_in_flight_bytes(), int64_t{500'000'000});

  // The step is the timeline's over the single-GPU GPU step, never shorter
  // than the compute it runs (the optimizer shared by four), which FSDP2's
  // copies and the collectives' interference lengthen by a few percent.
  auto breakdown =
      PredictOnDevice(trace_, *devices_->Find("H100-SXM"), *devices_->Find("H100-SXM"));
  ASSERT_TRUE(breakdown.ok()) << breakdown.status();
  auto iteration = IterationFromTrace(trace_, *breakdown);
  ASSERT_TRUE(iteration.ok()) << iteration.status();
  const int64_t optimizer = iteration->iteration.optimizer_ns;
  const int64_t compute = p.wall_time_ns() - optimizer + optimizer / 4;
  EXPECT_GT(fsdp.exposed_communication_ns(), 0);
  const int64_t copies_and_interference =
      fsdp.step_ns() - compute - fsdp.exposed_communication_ns();
  EXPECT_GT(copies_and_interference, 0);
  EXPECT_LT(copies_and_interference, compute / 10);
  EXPECT_GT(fsdp.step_ns(), p.wall_time_ns() - optimizer);
  EXPECT_GT(fsdp.samples_per_second(), 0);
}

// GPT-2 774M in bf16 on one H200 is near host-bound; FSDP2's host work per
// block makes its 2-GPU step host-bound: measured 243.3 ms on 2 x H200
// (eval/fsdp/results/h200x2_2026-11-29), against 146 ms on one GPU. A
// GPU-only timeline said 148 ms.
TEST_F(FsdpEngineTest, AHostBoundStepOnTwoH200sFollowsTheMeasuredOne) {
  auto trace = testing::LoadAgentFixture("h200_fsdp", "gpt2_774m_b4_bf16");
  ASSERT_TRUE(trace.ok()) << trace.status();
  // Its transformer blocks, as it was wrapped.
  auto response = OnTwoH200s(*trace, 36);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->predictions(0).parallel_size(), 1);
  const double step_ms = response->predictions(0).parallel(0).step_ns() / 1e6;
  EXPECT_NEAR(step_ms, 243.3, 0.1 * 243.3);
  // The single-GPU step is not host-bound (88 % busy) but the FSDP step's
  // timeline is: its error is FSDP2's host work's.
  EXPECT_FALSE(response->predictions(0).host_bound());
  EXPECT_DOUBLE_EQ(response->predictions(0).parallel(0).expected_error_percent(),
                   ParallelExpectedErrorPercent(response->predictions(0), 2, 0, true));
}

// GPT-2 355M fp32 traced with its modules (OperationTracker(model=...)):
// wrapped per GPT2Block by default, as the 2 x H200 run was (24 blocks
// and the root, whose step measured 260.2 ms), or by any class it has.
TEST_F(FsdpEngineTest, ATraceWithModulesIsWrappedPerBlock) {
  auto trace = testing::LoadAgentFixture("h200_fsdp", "gpt2_355m_b4_fp32_modules");
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_GT(trace->modules_size(), 24);
  auto by_default = OnTwoH200s(*trace, 0);
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  const v1::ParallelPrediction& fsdp = by_default->predictions(0).parallel(0);
  EXPECT_EQ(fsdp.fsdp_units(), 25u);
  EXPECT_NEAR(fsdp.step_ns() / 1e6, 260.2, 0.05 * 260.2);
  auto named = OnTwoH200s(*trace, 0, false, "GPT2Block");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->predictions(0).parallel(0).step_ns(), fsdp.step_ns());
  // Each Conv1D (four a block) a unit: more, smaller gathers.
  auto layers = OnTwoH200s(*trace, 0, false, "Conv1D");
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_EQ(layers->predictions(0).parallel(0).fsdp_units(), 24u * 4 + 1);
  // A class it does not have, or a count as well: the request is refused.
  auto missing = OnTwoH200s(*trace, 0, false, "LlamaDecoderLayer");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), ::testing::HasSubstr("GPT2Block"));
  auto both = OnTwoH200s(*trace, 24, false, "GPT2Block");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_THAT(both->predictions(0).parallel(0).unavailable(), ::testing::HasSubstr("fsdp_units"));
  // A trace without modules cannot be wrapped by class.
  auto plain = testing::LoadAgentFixture("h200_fsdp", "gpt2_355m_b4_fp32");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(OnTwoH200s(*plain, 0, false, "GPT2Block").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The rank-0 trace of the same kind of 2-GPU run (GPT-2 355M fp32, 260.2 ms
// measured a step) predicts that step back from the single-GPU step its
// work amounts to.
TEST_F(FsdpEngineTest, OneFsdpRanksTracePredictsItsOwnStep) {
  auto rank = testing::LoadAgentFixture("h200_fsdp", "gpt2_355m_b4_fp32_fsdp2r0");
  ASSERT_TRUE(rank.ok()) << rank.status();
  auto response = OnTwoH200s(*rank, 24);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::DevicePrediction& p = response->predictions(0);
  ASSERT_EQ(p.parallel_size(), 1);
  EXPECT_NEAR(p.parallel(0).step_ns() / 1e6, 260.2, 0.05 * 260.2);
  // Its memory read back as one GPU's and sharded again: the rank's own
  // peak (16.07 GiB measured on each rank), and the whole model's on one.
  EXPECT_NEAR(p.parallel(0).peak_memory_bytes_per_gpu() / double(1 << 30), 16.07, 0.03 * 16.07);
  ASSERT_TRUE(p.has_memory());
  EXPECT_GT(p.memory().peak_allocated_bytes(), p.parallel(0).peak_memory_bytes_per_gpu());
  EXPECT_EQ(p.rank_by_time(), 0u);  // a rank's single-GPU row is not one to rent
  // Without a count the units are the run's own: 24 blocks and the root.
  auto own = OnTwoH200s(*rank, 0);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->predictions(0).parallel(0).fsdp_units(), 25u);
  bool said = false;
  for (const v1::Warning& w : response->structured_warnings()) said |= w.kind() == "fsdp_rank";
  EXPECT_TRUE(said);
  // A class named for a rank whose trace names its modules wraps it so,
  // not the run's count.
  v1::Trace with_modules = *rank;
  auto add = [&with_modules](const std::string& path, const std::string& cls, int64_t bytes) {
    v1::Module* m = with_modules.add_modules();
    m->set_path(path);
    m->set_class_name(cls);
    m->set_parameter_bytes(bytes);
  };
  add("", "GPT2LMHeadModel", 0);
  add("wte", "Embedding", 200);
  for (int b = 0; b < 12; ++b) add("h." + std::to_string(b), "GPT2Block", 100);
  auto wrapped = OnTwoH200s(with_modules, 0, false, "GPT2Block");
  ASSERT_TRUE(wrapped.ok()) << wrapped.status();
  EXPECT_EQ(wrapped->predictions(0).parallel(0).fsdp_units(), 13u);
  // So a sharded fit can be asked of it: the measured run held batch 32
  // per GPU on two H200s and ran out of memory at 64.
  auto fit = OnTwoH200s(*rank, 24, /*fit=*/true);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->predictions(0).parallel(0).largest_fitting_batch(), 32u);
}

TEST(FsdpRankMemoryTest, TheShardedPartIsReadBackAsOneGpusAndShardedAgain) {
  MemoryModel rank;
  rank.start_bytes = 100;  // a quarter of the parameters and optimizer state
  rank.traced_batch = 4;
  // The forward's end: 30 bytes of gathered units, 5 of autocast copies,
  // 50 of activations; the optimizer: 40 bytes of sharded temporaries.
  rank.candidates = {{35, 50, 5}, {40, 0, 0}};
  const MemoryModel one = SingleGpuMemoryOfFsdpRank(rank, 4, 30);
  EXPECT_EQ(one.start_bytes, 400);
  EXPECT_DOUBLE_EQ(one.candidates[0].fixed_bytes, 5);  // the gathered units left out
  EXPECT_DOUBLE_EQ(one.candidates[1].fixed_bytes, 4 * (40 - 30));
  EXPECT_DOUBLE_EQ(one.candidates[0].batch_bytes, 50);
  // At the rank's own N the peak is its own (the in-flight units added back).
  EXPECT_EQ(FsdpPeakBytesPerGpu(one, 4, 4, 30), 100 + 35 + 50);
  // On two GPUs the sharded parts double; the rest does not.
  EXPECT_EQ(FsdpPeakBytesPerGpu(one, 4, 2, 30), 200 + 5 + 50 + 30);
}

TEST_F(FsdpEngineTest, TheForwardSplitsByBackwardOperation) {
  auto breakdown =
      PredictOnDevice(trace_, *devices_->Find("H100-SXM"), *devices_->Find("H100-SXM"));
  ASSERT_TRUE(breakdown.ok()) << breakdown.status();
  auto read = IterationFromTrace(trace_, *breakdown);
  ASSERT_TRUE(read.ok()) << read.status();
  const SingleGpuIteration& it = read->iteration;
  ASSERT_EQ(it.forward_op_ns.size(), it.backward_op_ns.size());
  int64_t split = 0;
  for (int64_t ns : it.forward_op_ns) split += ns;
  // All of the operations' forward time; only unclaimed kernels stay out.
  EXPECT_LE(split, it.forward_ns);
  EXPECT_GT(split, it.forward_ns * 9 / 10);
  auto units = FsdpUnitsByBytes(it, kDefaultFsdpUnits);
  ASSERT_TRUE(units.ok()) << units.status();
  int64_t unit_bytes = 0;
  for (const FsdpUnit& unit : units->units) unit_bytes += unit.bytes;
  EXPECT_EQ(unit_bytes, read->gradient_bytes);
}

TEST_F(FsdpEngineTest, OneGpuIsTheSingleGpuStep) {
  const v1::DevicePrediction p = OnH100({Config(1, v1::ParallelConfig::KIND_FULLY_SHARDED)});
  ASSERT_EQ(p.parallel_size(), 1);
  EXPECT_EQ(p.parallel(0).step_ns(), p.wall_time_ns());
  EXPECT_EQ(p.parallel(0).exposed_communication_ns(), 0);
}

TEST_F(FsdpEngineTest, MoreUnitsGatherSmallerPieces) {
  v1::ParallelConfig four = Config(4, v1::ParallelConfig::KIND_FULLY_SHARDED);
  four.set_fsdp_units(4);
  v1::ParallelConfig many = four;
  many.set_fsdp_units(32);
  const v1::DevicePrediction p = OnH100({four, many});
  ASSERT_EQ(p.parallel_size(), 2);
  EXPECT_LE(p.parallel(0).fsdp_units(), 4u);
  EXPECT_GT(p.parallel(1).fsdp_units(), p.parallel(0).fsdp_units());
  EXPECT_LT(p.parallel(1).unsharded_in_flight_bytes(), p.parallel(0).unsharded_in_flight_bytes());
  EXPECT_LT(p.parallel(1).peak_memory_bytes_per_gpu(), p.parallel(0).peak_memory_bytes_per_gpu());
}

TEST_F(FsdpEngineTest, TheCatalogsInstancesTakeTheRequestsKind) {
  auto catalogs =
      CatalogSet::LoadFromDirectory(std::string(HABITAT_DATA_DIR) + "/catalogs", *devices_);
  ASSERT_TRUE(catalogs.ok()) << catalogs.status();
  PredictionEngine engine(devices_.get(), nullptr);
  PredictionQuery query;
  query.devices = {"H100-SXM"};
  query.catalog = *catalogs->Get("aws");
  query.price_kind = v1::PRICE_KIND_ON_DEMAND;
  query.catalog_instances = true;
  v1::ParallelConfig two = Config(2, v1::ParallelConfig::KIND_FULLY_SHARDED);
  two.set_fsdp_units(4);
  query.parallel = {two};
  auto response = engine.Predict(trace_, "", query);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::DevicePrediction& p = response->predictions(0);
  // The request's 2 GPUs, then the catalog's 8 (p5.48xlarge).
  ASSERT_GE(p.parallel_size(), 2);
  for (const v1::ParallelPrediction& q : p.parallel()) {
    EXPECT_EQ(q.kind(), v1::ParallelConfig::KIND_FULLY_SHARDED) << q.gpus_per_node();
    EXPECT_LE(q.fsdp_units(), 4u) << q.gpus_per_node();
    EXPECT_GT(q.peak_memory_bytes_per_gpu(), 0) << q.gpus_per_node();
  }
}

TEST_F(FsdpEngineTest, AnUnmodelledKindIsUnavailableWithItsReason) {
  const v1::DevicePrediction p = OnH100({Config(4, v1::ParallelConfig::KIND_TENSOR_PARALLEL)});
  ASSERT_EQ(p.parallel_size(), 1);
  EXPECT_THAT(p.parallel(0).unavailable(), HasSubstr("not modelled"));
  EXPECT_EQ(p.parallel(0).step_ns(), 0);
}

// A fit asking for FSDP on four L4s predicts each GPU at the largest batch
// per GPU that fits them sharded, which is at least what fits one L4 whole,
// and says so on the configuration.
TEST_F(FsdpEngineTest, AShardedFitPredictsTheBatchThatFitsTheShards) {
  PredictionEngine engine(devices_.get(), nullptr);
  PredictionQuery query;
  query.devices = {"L4"};
  query.parallel = {Config(4, v1::ParallelConfig::KIND_FULLY_SHARDED)};
  query.fit.emplace();
  auto response = engine.Predict(trace_, "", query);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::DevicePrediction& p = response->predictions(0);
  ASSERT_EQ(p.parallel_size(), 1);
  const v1::ParallelPrediction& fsdp = p.parallel(0);
  EXPECT_GT(fsdp.largest_fitting_batch(), 0u);
  EXPECT_EQ(p.batch_size(), fsdp.largest_fitting_batch());
  EXPECT_TRUE(fsdp.fits_memory());
  EXPECT_EQ(fsdp.fewest_gpus_to_fit(), 1u);  // GPT-2 small fits one L4
  EXPECT_GE(p.batch_size(), p.memory().largest_fitting_batch());
  EXPECT_EQ(p.memory().largest_fitting_batch(),
            LargestFittingBatch(*MemoryModelFor(trace_), p.memory().usable_bytes(), 0));
}

}  // namespace
}  // namespace habitat
