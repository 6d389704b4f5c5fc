// Tests of the prediction core on a real ResNet-50 iteration captured on an
// H100 (tests/testdata/kineto/h100).
#include "core/predict/prediction_engine.h"

#include <functional>

#include "absl/time/clock.h"
#include "core/predict/expected_error.h"
#include "core/predict/host_replay.h"
#include "core/testing/trace_fixtures.h"
#include "core/trace/trace_totals.h"
#include "core/trace/trace_validation.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

class PredictionEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto devices =
        DeviceDatabase::LoadFromFile(std::string(HABITAT_DATA_DIR) + "/devices.textproto");
    ASSERT_TRUE(devices.ok()) << devices.status();
    devices_ = new DeviceDatabase(std::move(*devices));
    auto trace = testing::LoadKinetoFixture("h100", "resnet50_b16_fp32", 16);
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = new v1::Trace(std::move(*trace));
  }
  static void TearDownTestSuite() {
    delete devices_;
    delete trace_;
  }

  static DeviceDatabase* devices_;
  static v1::Trace* trace_;
};

DeviceDatabase* PredictionEngineTest::devices_ = nullptr;
v1::Trace* PredictionEngineTest::trace_ = nullptr;

TEST_F(PredictionEngineTest, FixtureResolvesToH100) {
  PredictionEngine engine(devices_, nullptr);
  auto origin = engine.ResolveOrigin(*trace_);
  ASSERT_TRUE(origin.ok()) << origin.status();
  EXPECT_EQ((*origin)->id(), "H100-SXM");
}

TEST_F(PredictionEngineTest, OriginDeviceGetsTheMeasuredTime) {
  auto origin = devices_->Get("H100-SXM");
  ASSERT_TRUE(origin.ok());
  auto prediction = PredictOnDevice(*trace_, **origin, **origin);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_TRUE(prediction->is_origin());
  EXPECT_EQ(prediction->gpu_time_ns(), SumOfPassTimes(*trace_));
  for (const auto& op : prediction->operations()) {
    EXPECT_EQ(op.method(), v1::PREDICTION_METHOD_MEASURED) << op.name();
  }
}

// Method totals carry the origin time of their operations too, so shares
// "of the origin GPU time" can be taken from a summary without the
// breakdown; together they are the whole origin iteration.
TEST_F(PredictionEngineTest, MethodTotalsAddUpToTheOriginTime) {
  auto origin = devices_->Get("H100-SXM");
  auto target = devices_->Get("T4");
  ASSERT_TRUE(origin.ok() && target.ok());
  auto prediction = PredictOnDevice(*trace_, **origin, **target);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  int64_t predicted = 0, from_totals = 0, from_ops = 0;
  for (const auto& total : prediction->method_totals()) {
    predicted += total.predicted_ns();
    from_totals += total.origin_ns();
  }
  for (const auto& op : prediction->operations()) {
    from_ops += op.origin_forward_ns() + op.origin_backward_ns();
  }
  for (const auto& kernel : trace_->unattributed_kernels()) from_ops += kernel.duration_ns();
  EXPECT_EQ(predicted, prediction->gpu_time_ns());
  EXPECT_EQ(from_totals, from_ops);
  EXPECT_GT(from_totals, 0);
}

TEST_F(PredictionEngineTest, OtherDevicesScaleKernelAlikeOpsAndFlagTheRest) {
  auto origin = devices_->Get("H100-SXM");
  auto target = devices_->Get("A100-SXM-80GB");
  ASSERT_TRUE(origin.ok() && target.ok());
  auto prediction = PredictOnDevice(*trace_, **origin, **target);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  int wave = 0, unscaled = 0;
  int64_t sum = 0;
  for (const auto& op : prediction->operations()) {
    sum += op.predicted_forward_ns() + op.predicted_backward_ns();
    if (op.method() == v1::PREDICTION_METHOD_WAVE_SCALING) ++wave;
    if (op.method() == v1::PREDICTION_METHOD_UNSCALED) {
      ++unscaled;
      if (op.origin_forward_ns() + op.origin_backward_ns() > 0) {
        EXPECT_FALSE(op.warnings().empty()) << op.name();
      }
    }
  }
  EXPECT_GT(wave, 50);      // batch norms, ReLUs, adds, pooling, optimizer
  EXPECT_GT(unscaled, 20);  // ResNet-50 has 53 convolutions + 1 linear
  EXPECT_EQ(prediction->gpu_time_ns(), sum);
  ASSERT_FALSE(prediction->warnings().empty());
  EXPECT_NE(prediction->warnings(0).find("carried over unscaled"), std::string::npos);
}

TEST_F(PredictionEngineTest, SameComputeUnitsWaveScaleEvenKernelVaryingOps) {
  // The H200 is an H100 with more memory bandwidth: same SMs, clock and
  // peak FLOPS, so cuBLAS/cuDNN run the same kernels and convolutions are
  // wave-scaled as compute-bound work instead of carried over unscaled.
  auto origin = devices_->Get("H100-SXM");
  auto target = devices_->Get("H200");
  ASSERT_TRUE(origin.ok() && target.ok());
  auto prediction = PredictOnDevice(*trace_, **origin, **target);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  int convolutions = 0;
  for (const auto& op : prediction->operations()) {
    for (const auto& warning : op.warnings()) {
      EXPECT_EQ(warning.find("architecture-specific"), std::string::npos) << warning;
    }
    if (op.name() != "aten::conv2d") continue;
    ++convolutions;
    EXPECT_EQ(op.method(), v1::PREDICTION_METHOD_WAVE_SCALING);
    EXPECT_TRUE(op.warnings().empty()) << op.warnings(0);
    // Compute-bound work does not change; only each kernel's fixed part does
    // (1459 ns on the H100, 1234 ns on the H200).
    const int64_t origin_ns = op.origin_forward_ns();
    EXPECT_LE(op.predicted_forward_ns(), origin_ns);
    EXPECT_GT(op.predicted_forward_ns(), origin_ns * 9 / 10) << origin_ns;
  }
  EXPECT_EQ(convolutions, 53);
  // More memory bandwidth and the same SMs: never slower here.
  EXPECT_LT(prediction->gpu_time_ns(), SumOfPassTimes(*trace_));
}

TEST_F(PredictionEngineTest, SameComputeUnitsNumbersAreUnchanged) {
  // H100 -> H200 of this fixture as predicted before the per-operation
  // modes, hardware limits and expected errors existed (the committed golden
  // predict_csv, 9.711921 ms): same-compute targets keep their numbers.
  auto origin = devices_->Get("H100-SXM");
  auto target = devices_->Get("H200");
  ASSERT_TRUE(origin.ok() && target.ok());
  auto prediction = PredictOnDevice(*trace_, **origin, **target);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_EQ(prediction->gpu_time_ns(), 9'711'921);
  for (const auto& op : prediction->operations()) {
    EXPECT_FALSE(op.at_hardware_limit()) << op.name();
    EXPECT_TRUE(op.origin_math_mode().empty()) << op.name();
    // Operations without kernels (views, AccumulateGrad) take no GPU time.
    EXPECT_EQ(op.expected_error_percent(),
              op.method() == v1::PREDICTION_METHOD_UNSCALED ? 0.0 : kSameComputeUnitsErrorPercent)
        << op.name();
  }
  EXPECT_DOUBLE_EQ(prediction->expected_error_percent(), kSameComputeUnitsErrorPercent);
}

TEST_F(PredictionEngineTest, ExpectedErrorIsZeroOnTheOriginAndWeightedElsewhere) {
  auto origin = devices_->Get("H100-SXM");
  auto a100 = devices_->Get("A100-SXM-80GB");
  ASSERT_TRUE(origin.ok() && a100.ok());
  auto measured = PredictOnDevice(*trace_, **origin, **origin);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->expected_error_percent(), 0.0);
  for (const auto& op : measured->operations()) EXPECT_EQ(op.expected_error_percent(), 0.0);
  // Without a kernel-varying model the convolutions are carried over
  // unscaled (100 %), the rest wave-scaled (10 %): the iteration's error is
  // their predicted-time-weighted mean.
  auto prediction = PredictOnDevice(*trace_, **origin, **a100);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  double weighted = 0;
  for (const auto& op : prediction->operations()) {
    const bool ran = op.origin_forward_ns() + op.origin_backward_ns() > 0;
    const double expected = op.method() != v1::PREDICTION_METHOD_UNSCALED ? kKernelAlikeErrorPercent
                            : ran                                         ? kUnscaledErrorPercent
                                                                          : 0.0;
    EXPECT_EQ(op.expected_error_percent(), expected) << op.name();
    weighted +=
        expected * static_cast<double>(op.predicted_forward_ns() + op.predicted_backward_ns());
  }
  EXPECT_NEAR(prediction->expected_error_percent(),
              weighted / static_cast<double>(prediction->gpu_time_ns()), 1e-9);
  EXPECT_GT(prediction->expected_error_percent(), kKernelAlikeErrorPercent);
  EXPECT_LT(prediction->expected_error_percent(), kUnscaledErrorPercent);
}

TEST(ExpectedErrorMean, WeightsByPredictedTime) {
  ExpectedErrorMean mean;
  EXPECT_EQ(mean.percent(), 0.0);
  mean.Add(0, 500.0);  // no time, no weight
  EXPECT_EQ(mean.percent(), 0.0);
  mean.Add(3'000, 10.0);
  mean.Add(1'000, 50.0);
  EXPECT_DOUBLE_EQ(mean.percent(), (10.0 * 3 + 50.0 * 1) / 4);
  v1::DevicePrediction origin;
  origin.set_is_origin(true);
  origin.add_operations()->set_predicted_forward_ns(1'000);
  origin.mutable_operations(0)->set_expected_error_percent(30.0);
  EXPECT_EQ(IterationExpectedErrorPercent(origin), 0.0);
  origin.set_is_origin(false);
  EXPECT_DOUBLE_EQ(IterationExpectedErrorPercent(origin), 30.0);
}

TEST_F(PredictionEngineTest, PredictCoversAllProductsAndRanks) {
  PredictionEngine engine(devices_, std::make_shared<PredictionCache>(100));
  PredictionQuery query;
  auto response = engine.Predict(*trace_, "", query);
  ASSERT_TRUE(response.ok()) << response.status();
  int products = 0;
  for (const auto& spec : devices_->devices()) products += spec.test_only() ? 0 : 1;
  ASSERT_EQ(response->predictions_size(), products);
  std::vector<bool> seen(products + 1, false);
  for (const auto& p : response->predictions()) {
    ASSERT_GE(p.rank_by_time(), 1u);
    ASSERT_LE(p.rank_by_time(), static_cast<uint32_t>(products));
    EXPECT_FALSE(seen[p.rank_by_time()]);
    seen[p.rank_by_time()] = true;
    EXPECT_EQ(p.rank_by_cost(), 0u);      // no catalog
    EXPECT_TRUE(p.operations().empty());  // no breakdown asked
    EXPECT_NEAR(p.samples_per_second(), 16 / (p.wall_time_ns() / 1e9), 1e-6);
  }
  EXPECT_EQ(response->origin_device_id(), "H100-SXM");
  EXPECT_TRUE(response->trace_id().rfind("sha256:", 0) == 0);
  // For a client that predicted by trace id and has no trace to read them.
  EXPECT_EQ(response->model_name(), trace_->model_name());
  EXPECT_FALSE(response->model_name().empty());
  EXPECT_EQ(response->precision(), trace_->precision());
}

TEST_F(PredictionEngineTest, SecondPredictIsServedFromTheCache) {
  PredictionEngine engine(devices_, std::make_shared<PredictionCache>(100));
  PredictionQuery query;
  query.devices = {"H200", "A100-SXM-80GB"};
  query.include_breakdown = true;
  PredictionStats first, second;
  auto a = engine.Predict(*trace_, "", query, &first);
  auto b = engine.Predict(*trace_, "", query, &second);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(first.cache_misses, 2);
  EXPECT_EQ(second.cache_hits, 2);
  EXPECT_EQ(a->SerializeAsString(), b->SerializeAsString());
  EXPECT_FALSE(a->predictions(0).operations().empty());
}

// The breakdown is kept only when asked for: most of an entry's bytes, and
// most calls do not read it. A later call that asks for it predicts again.
TEST_F(PredictionEngineTest, CacheKeepsTheBreakdownOnlyWhenAsked) {
  auto cache = std::make_shared<PredictionCache>(100);
  PredictionEngine engine(devices_, cache);
  PredictionQuery query;
  query.devices = {"H200", "A100-SXM-80GB"};
  ASSERT_TRUE(engine.Predict(*trace_, "", query).ok());
  const size_t summaries = cache->bytes();
  query.include_breakdown = true;
  PredictionStats with_breakdown;
  auto full = engine.Predict(*trace_, "", query, &with_breakdown);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(with_breakdown.cache_misses, 2);
  EXPECT_FALSE(full->predictions(0).operations().empty());
  // The breakdown of ~300 operations dwarfs the summaries.
  EXPECT_GT(cache->bytes(), 10 * summaries);
  query.include_breakdown = false;
  PredictionStats summary_again;
  auto summary = engine.Predict(*trace_, "", query, &summary_again);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary_again.cache_hits, 2);
  EXPECT_TRUE(summary->predictions(0).operations().empty());
}

// At another batch every GPU is predicted from the scaled trace: the origin
// is no longer "measured", throughput counts the new batch, and the cache
// keeps the two batches apart.
TEST_F(PredictionEngineTest, AnotherBatchIsPredictedFromTheScaledTrace) {
  PredictionEngine engine(devices_, std::make_shared<PredictionCache>(100));
  PredictionQuery query;
  query.devices = {"H100-SXM", "A100-SXM-80GB"};
  query.include_breakdown = true;
  auto traced = engine.Predict(*trace_, "", query);
  query.batch_size = 64;
  auto scaled = engine.Predict(*trace_, "", query);
  ASSERT_TRUE(traced.ok() && scaled.ok()) << scaled.status();
  EXPECT_EQ(scaled->batch_size(), 64u);
  EXPECT_EQ(scaled->traced_batch_size(), 16u);
  EXPECT_EQ(traced->traced_batch_size(), 16u);
  ASSERT_FALSE(scaled->warnings().empty());
  EXPECT_NE(scaled->warnings(0).find("predicted at batch 64 from a trace at batch 16"),
            std::string::npos);
  for (int d = 0; d < 2; ++d) {
    const v1::DevicePrediction& at16 = traced->predictions(d);
    const v1::DevicePrediction& at64 = scaled->predictions(d);
    EXPECT_EQ(at16.device_id(), at64.device_id());
    // More work per iteration, but less than 4x the time: fixed parts.
    EXPECT_GT(at64.gpu_time_ns(), 2 * at16.gpu_time_ns()) << at64.device_id();
    EXPECT_LT(at64.gpu_time_ns(), 4 * at16.gpu_time_ns()) << at64.device_id();
    EXPECT_GT(at64.samples_per_second(), at16.samples_per_second()) << at64.device_id();
    EXPECT_GT(at64.expected_error_percent(), at16.expected_error_percent());
  }
  const v1::DevicePrediction& origin = scaled->predictions(0);
  ASSERT_TRUE(origin.is_origin());
  for (const auto& op : origin.operations()) {
    EXPECT_EQ(op.method(), v1::PREDICTION_METHOD_BATCH_SCALED) << op.name();
  }
  query.batch_size = 16;  // the trace's own: the same as not asking
  auto same = engine.Predict(*trace_, "", query);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->SerializeAsString(), traced->SerializeAsString());
}

TEST_F(PredictionEngineTest, StopsWhenItsStopConditionSays) {
  PredictionEngine engine(devices_, nullptr);
  PredictionQuery query;
  const StopCondition late(absl::Now() - absl::Seconds(1), "the test's deadline");
  query.stop = &late;
  auto response = engine.Predict(*trace_, "", query);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded) << response.status();
  EXPECT_NE(response.status().message().find("the test's deadline"), absl::string_view::npos);

  // Cancelled after the third check: part of the way through the GPUs.
  int checks = 0;
  const StopCondition cancelled(absl::InfiniteFuture(), "", [&checks] { return ++checks > 3; });
  query.stop = &cancelled;
  response = engine.Predict(*trace_, "", query);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kCancelled) << response.status();
  EXPECT_EQ(checks, 4);
}

TEST_F(PredictionEngineTest, RefusesWorkAboveItsLimitBeforeDoingAny) {
  PredictionEngine engine(devices_, nullptr);
  PredictionQuery query;
  const int64_t per_device = PredictionWorkPerDevice(*trace_);
  EXPECT_GT(per_device, trace_->operations_size());
  query.max_work = (3 + kPerCallWorkInDevices) * per_device;
  query.devices = {"H200", "A100-SXM-80GB", "T4", "L4"};
  int checks = 0;
  const StopCondition counting(absl::InfiniteFuture(), "", [&checks] { return ++checks < 0; });
  query.stop = &counting;
  auto response = engine.Predict(*trace_, "", query);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kResourceExhausted) << response.status();
  EXPECT_NE(response.status().message().find("fewer GPUs"), absl::string_view::npos);
  EXPECT_EQ(checks, 0) << "work started before the refusal";
  query.devices.pop_back();
  EXPECT_TRUE(engine.Predict(*trace_, "", query).ok());
}

TEST_F(PredictionEngineTest, PricesFollowFromTimeAndCatalog) {
  std::vector<v1::DevicePrediction> predictions(2);
  predictions[0].set_device_id("H100-SXM");
  predictions[0].set_wall_time_ns(100'000'000);  // 0.1 s per 64 samples
  predictions[1].set_device_id("T4");
  predictions[1].set_wall_time_ns(400'000'000);
  v1::PriceCatalog catalog;
  auto* h100 = catalog.add_prices();
  h100->set_device_id("H100-SXM");
  h100->set_on_demand_per_gpu_hour(4.0);
  auto* t4 = catalog.add_prices();
  t4->set_device_id("T4");
  t4->set_on_demand_per_gpu_hour(0.5);
  for (auto& p : predictions) p.set_batch_size(64);
  PriceAndRank(&catalog, v1::PRICE_KIND_ON_DEMAND, &predictions);
  // H100: 640 samples/s; 4 $/h -> 4/3600 $/s / 640 samples/s * 1000.
  EXPECT_NEAR(predictions[0].samples_per_second(), 640.0, 1e-9);
  EXPECT_NEAR(predictions[0].cost_per_1000_samples(), 4.0 / 3600 / 640 * 1000, 1e-12);
  EXPECT_NEAR(predictions[0].samples_per_currency_unit(), 640.0 * 3600 / 4.0, 1e-6);
  // T4: 160 samples/s at 0.5 $/h is cheaper per sample (0.000868 vs 0.001736).
  EXPECT_EQ(predictions[0].rank_by_time(), 1u);
  EXPECT_EQ(predictions[1].rank_by_time(), 2u);
  EXPECT_EQ(predictions[1].rank_by_cost(), 1u);
  EXPECT_EQ(predictions[0].rank_by_cost(), 2u);
}

// A host-bound iteration: the GPU that is fastest in GPU time waits for the
// host like the others, so it is neither faster nor cheaper per sample.
TEST_F(PredictionEngineTest, ThroughputCostAndRanksFollowWallTimeNotGpuTime) {
  std::vector<v1::DevicePrediction> predictions(3);
  predictions[0].set_device_id("B200");
  predictions[0].set_gpu_time_ns(5'000'000);
  predictions[0].set_wall_time_ns(40'000'000);
  predictions[1].set_device_id("H100-SXM");
  predictions[1].set_gpu_time_ns(10'000'000);
  predictions[1].set_wall_time_ns(40'000'000);
  predictions[2].set_device_id("T4");
  predictions[2].set_gpu_time_ns(30'000'000);
  predictions[2].set_wall_time_ns(45'000'000);
  v1::PriceCatalog catalog;
  for (auto [id, price] : {std::pair{"B200", 14.0}, {"H100-SXM", 7.0}, {"T4", 0.5}}) {
    auto* row = catalog.add_prices();
    row->set_device_id(id);
    row->set_on_demand_per_gpu_hour(price);
  }
  for (auto& p : predictions) p.set_batch_size(32);
  PriceAndRank(&catalog, v1::PRICE_KIND_ON_DEMAND, &predictions);
  EXPECT_NEAR(predictions[0].samples_per_second(), 32 / 0.040, 1e-9);
  EXPECT_NEAR(predictions[2].samples_per_second(), 32 / 0.045, 1e-9);
  EXPECT_NEAR(predictions[0].cost_per_1000_samples(), 14.0 / 3600 * 0.040 / 32 * 1000, 1e-12);
  // Equal wall times: the one with less GPU time first.
  EXPECT_EQ(predictions[0].rank_by_time(), 1u);
  EXPECT_EQ(predictions[1].rank_by_time(), 2u);
  EXPECT_EQ(predictions[2].rank_by_time(), 3u);
  // By GPU time the B200 would cost 14/7 * 5/10 = the H100's; by wall time
  // it costs twice as much, and the T4 is cheapest.
  EXPECT_EQ(predictions[2].rank_by_cost(), 1u);
  EXPECT_EQ(predictions[1].rank_by_cost(), 2u);
  EXPECT_EQ(predictions[0].rank_by_cost(), 3u);
}

// Fitted to their memory, GPUs run different batches: they compare by
// throughput, and one the batch does not fit is not ranked.
TEST_F(PredictionEngineTest, RanksCompareThroughputAcrossBatchesAndSkipWhatDoesNotFit) {
  std::vector<v1::DevicePrediction> predictions(3);
  predictions[0].set_device_id("L4");
  predictions[0].set_batch_size(32);
  predictions[0].set_wall_time_ns(50'000'000);  // 640 samples/s
  predictions[1].set_device_id("H100-SXM");
  predictions[1].set_batch_size(256);
  predictions[1].set_wall_time_ns(100'000'000);  // 2560 samples/s, though slower per step
  predictions[2].set_device_id("T4");
  predictions[2].set_batch_size(32);
  predictions[2].set_wall_time_ns(10'000'000);
  predictions[2].mutable_memory()->set_fits(false);
  v1::PriceCatalog catalog;
  for (auto [id, price] : {std::pair{"L4", 0.8}, {"H100-SXM", 4.0}, {"T4", 0.5}}) {
    auto* row = catalog.add_prices();
    row->set_device_id(id);
    row->set_on_demand_per_gpu_hour(price);
  }
  PriceAndRank(&catalog, v1::PRICE_KIND_ON_DEMAND, &predictions);
  EXPECT_NEAR(predictions[1].samples_per_second(), 2560, 1e-9);
  EXPECT_EQ(predictions[1].rank_by_time(), 1u);
  EXPECT_EQ(predictions[0].rank_by_time(), 2u);
  EXPECT_EQ(predictions[2].rank_by_time(), 0u);
  EXPECT_EQ(predictions[2].rank_by_cost(), 0u);
  EXPECT_TRUE(predictions[2].has_price());  // priced, for reference, but not ranked
  // 0.8/640 per sample against 4/2560: the L4 is cheaper.
  EXPECT_EQ(predictions[0].rank_by_cost(), 1u);
  EXPECT_EQ(predictions[1].rank_by_cost(), 2u);
}

TEST_F(PredictionEngineTest, WallTimeIsTheReplayOrTheGpuTimeAndSaysWhich) {
  auto origin = devices_->Get("H100-SXM");
  auto target = devices_->Get("A100-SXM-80GB");
  ASSERT_TRUE(origin.ok() && target.ok());
  auto replayed = PredictOnDevice(*trace_, **origin, **target);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  ASSERT_TRUE(HasHostTimeline(*trace_));
  EXPECT_GT(replayed->wall_time_ns(), 0);
  EXPECT_FALSE(replayed->wall_time_is_gpu_time());
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  // Deprecated, still filled.
  EXPECT_EQ(replayed->wall_ns(), replayed->wall_time_ns());
  EXPECT_EQ(replayed->iteration_ns(), replayed->gpu_time_ns());
#pragma GCC diagnostic pop

  v1::Trace no_host = *trace_;
  for (auto& op : *no_host.mutable_operations()) {
    for (auto& kernel : *op.mutable_forward()->mutable_kernels()) {
      kernel.set_has_launch_time(false);
    }
  }
  ASSERT_FALSE(HasHostTimeline(no_host));
  auto gpu_only = PredictOnDevice(no_host, **origin, **target);
  ASSERT_TRUE(gpu_only.ok()) << gpu_only.status();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_EQ(gpu_only->wall_ns(), 0);
#pragma GCC diagnostic pop
  EXPECT_EQ(gpu_only->wall_time_ns(), gpu_only->gpu_time_ns());
  EXPECT_TRUE(gpu_only->wall_time_is_gpu_time());

  PredictionEngine engine(devices_, nullptr);
  PredictionQuery query;
  query.devices = {"T4"};
  auto response = engine.Predict(no_host, "", query);
  ASSERT_TRUE(response.ok()) << response.status();
  bool said = false;
  for (const auto& w : response->warnings()) {
    said = said || w.find("the trace has no host timeline") != std::string::npos;
  }
  EXPECT_TRUE(said) << response->DebugString();
}

TEST_F(PredictionEngineTest, BadQueriesAreRejected) {
  PredictionEngine engine(devices_, nullptr);
  PredictionQuery query;
  query.devices = {"NoSuchGPU"};
  EXPECT_EQ(engine.Predict(*trace_, "", query).status().code(), absl::StatusCode::kNotFound);
  query.devices = {"T4", "T4"};
  EXPECT_EQ(engine.Predict(*trace_, "", query).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Trace unknown_origin = *trace_;
  unknown_origin.mutable_origin()->set_name("Imaginary GPU 9000");
  query.devices = {"T4"};
  auto status = engine.Predict(unknown_origin, "", query).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("Imaginary GPU 9000"), std::string::npos);
}

// Each mutation of the real trace must be rejected, naming the field.
TEST_F(PredictionEngineTest, ValidationNamesTheBadField) {
  struct Case {
    const char* expected_field;
    std::function<void(v1::Trace*)> mutate;
  };
  const std::vector<Case> cases = {
      {"batch_size", [](v1::Trace* t) { t->set_batch_size(0); }},
      {"operations[0].forward.kernels[0].duration_ns",
       [](v1::Trace* t) {
         t->mutable_operations(0)->mutable_forward()->mutable_kernels(0)->set_duration_ns(-5);
       }},
      {"operations[0].forward.kernels[0].grid",
       [](v1::Trace* t) {
         t->mutable_operations(0)->mutable_forward()->mutable_kernels(0)->mutable_grid()->set_x(0);
       }},
      {"operations[0].forward.kernels[0].block",
       [](v1::Trace* t) {
         t->mutable_operations(0)->mutable_forward()->mutable_kernels(0)->mutable_block()->set_x(
             2048);
       }},
      {"operations[1].name",
       [](v1::Trace* t) { t->mutable_operations(1)->set_name("aten::\x01relu"); }},
      {"operations[1].name", [](v1::Trace* t) { t->mutable_operations(1)->set_name(""); }},
      {"iteration_wall_ns", [](v1::Trace* t) { t->set_iteration_wall_ns(-1); }},
      {"origin", [](v1::Trace* t) { t->clear_origin(); }},
      {"operations",
       [](v1::Trace* t) {
         t->clear_operations();
         t->clear_unattributed_kernels();
       }},
      {"format_version", [](v1::Trace* t) { t->set_format_version(7); }},
  };
  // Find an op with a forward kernel to mutate.
  ASSERT_GT(trace_->operations(0).forward().kernels_size(), 0)
      << "first op of the fixture has no kernels; pick another";
  for (const auto& c : cases) {
    v1::Trace broken = *trace_;
    c.mutate(&broken);
    absl::Status status = ValidateTrace(broken);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.expected_field;
    EXPECT_NE(status.message().find(c.expected_field), std::string::npos)
        << "expected '" << c.expected_field << "' in: " << status.message();
  }
  EXPECT_TRUE(ValidateTrace(*trace_).ok()) << ValidateTrace(*trace_);
}

}  // namespace
}  // namespace habitat
