// The DDP iteration read from the agent's real traces (H100,
// tests/testdata/agent_suite/h100_memory), predicted on their own GPU.
#include "core/predict/ddp_prediction.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "core/devices/device_database.h"
#include "core/predict/prediction_engine.h"
#include "core/pricing/price_catalog.h"
#include "core/testing/trace_fixtures.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

namespace v1 = habitat::v1;

v1::DevicePrediction OnTheH100(const v1::Trace& trace) {
  auto devices = DeviceDatabase::LoadFromFile(std::string(HABITAT_DATA_DIR) + "/devices.textproto");
  EXPECT_TRUE(devices.ok()) << devices.status();
  const v1::DeviceSpec* h100 = devices->Find("H100-SXM");
  auto prediction = PredictOnDevice(trace, *h100, *h100);
  EXPECT_TRUE(prediction.ok()) << prediction.status();
  return prediction.ok() ? *prediction : v1::DevicePrediction();
}

TEST(DdpIterationTest, ResNetGradientsAreItsParametersInBackwardOrder) {
  auto loaded = testing::LoadAgentFixture("h100_memory", "resnet50_b16_fp32");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const v1::Trace& trace = *loaded;
  const v1::DevicePrediction prediction = OnTheH100(trace);
  auto read = IterationFromTrace(trace, prediction);
  ASSERT_TRUE(read.ok()) << read.status();
  const SingleGpuIteration& it = read->iteration;
  // torchvision's ResNet-50: 25,557,032 fp32 parameters in 161 tensors.
  EXPECT_EQ(it.params.size(), 161u);
  EXPECT_EQ(read->gradient_bytes, int64_t{25'557'032} * 4);
  EXPECT_EQ(read->unmatched_params, 0);
  // The classifier's gradients are ready first, the stem's last.
  EXPECT_EQ(it.params.front().bytes, 1000 * 4);  // fc.bias
  for (size_t i = 1; i < it.params.size(); ++i) {
    EXPECT_GE(it.params[i].ready_after_op, it.params[i - 1].ready_after_op) << i;
  }
  EXPECT_EQ(it.params.back().bytes, 64 * 3 * 7 * 7 * 4);  // conv1.weight
  // 53 batch norms: running mean and variance over their 26,560 channels
  // in all, fp32, and a num_batches_tracked each.
  EXPECT_EQ(it.buffers, 3 * 53);
  EXPECT_EQ(it.buffer_bytes, int64_t{2} * 26'560 * 4 + 53 * 8);
  EXPECT_GT(it.params.back().ready_after_op, static_cast<int>(it.backward_op_ns.size()) * 9 / 10);
  EXPECT_GT(it.optimizer_ns, 0);
  EXPECT_EQ(SingleGpuStepNs(it), prediction.gpu_time_ns());
}

TEST(DdpIterationTest, EveryModelsParametersFindTheirBackwardOperation) {
  for (const char* name : {"transformer_b32_fp32", "gpt2_b8_bf16", "vit_b32_fp32",
                           "inception_v3_b16_fp32", "gnmt_b32_fp32"}) {
    auto loaded = testing::LoadAgentFixture("h100_memory", name);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const v1::Trace& trace = *loaded;
    const v1::DevicePrediction prediction = OnTheH100(trace);
    auto read = IterationFromTrace(trace, prediction);
    ASSERT_TRUE(read.ok()) << name << ": " << read.status();
    EXPECT_EQ(read->unmatched_params, 0) << name;
    EXPECT_GT(read->gradient_bytes, 0) << name;
    EXPECT_EQ(SingleGpuStepNs(read->iteration), prediction.gpu_time_ns()) << name;
  }
}

// Two linears with weights of one shape, then their gradients, last layer's
// first; each operation 1 ms forward and backward in the prediction.
v1::Trace TwoLinearsOfOneShape() {
  v1::Trace trace;
  for (const char* name : {"aten::linear", "aten::linear", "torch::autograd::AccumulateGrad",
                           "torch::autograd::AccumulateGrad"}) {
    v1::Operation* op = trace.add_operations();
    op->set_name(name);
    op->mutable_backward();
    v1::TensorArgument* weight = op->add_arguments()->mutable_tensor();
    weight->add_shape(8);
    weight->add_shape(8);
    weight->set_dtype("float");
  }
  return trace;
}

TEST(DdpIterationTest, TheRecordedProducerPlacesAGradientWhereShapesCannot) {
  v1::Trace trace = TwoLinearsOfOneShape();
  v1::DevicePrediction prediction;
  for (int i = 0; i < trace.operations_size(); ++i) {
    v1::OperationPrediction* op = prediction.add_operations();
    op->set_predicted_forward_ns(1'000'000);
    op->set_predicted_backward_ns(1'000'000);
  }
  // Backward order: the second linear (position 0), then the first (1).
  // By shape both gradients follow the second linear's backward pass.
  auto by_shape = IterationFromTrace(trace, prediction);
  ASSERT_TRUE(by_shape.ok()) << by_shape.status();
  ASSERT_EQ(by_shape->iteration.params.size(), 2u);
  EXPECT_EQ(by_shape->iteration.params[0].ready_after_op, 0);
  EXPECT_EQ(by_shape->iteration.params[1].ready_after_op, 0);
  // The agent's producers put the first linear's after its own.
  trace.mutable_operations(2)->set_gradient_producer(1);
  trace.mutable_operations(3)->set_gradient_producer(0);
  auto recorded = IterationFromTrace(trace, prediction);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_EQ(recorded->iteration.params[0].ready_after_op, 0);
  EXPECT_EQ(recorded->iteration.params[1].ready_after_op, 1);
  EXPECT_EQ(recorded->unmatched_params, 0);
  // A producer that is not a backward operation falls back to the shapes.
  trace.mutable_operations(3)->set_gradient_producer(2);
  auto fallback = IterationFromTrace(trace, prediction);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->iteration.params[1].ready_after_op, 0);
}

// Real H100 traces with each gradient's producer: the agent's
// (tests/testdata/agent_suite/h100_producers) and Kineto profiles imported
// (tests/testdata/kineto/h100). The shapes pick the first backward
// operation that took a tensor of the parameter's shape, so the producer is
// never earlier; in these traces it is later for 83 of 829 gradients of the
// Kineto profiles. (DCGAN's step runs two backward passes, the
// discriminator's and then the generator's through the discriminator, which
// one backward order cannot hold: there only the producers are checked.)
TEST(DdpIterationTest, ProducersOfRealProfilesAreNeverBeforeTheShapesGuess) {
  std::vector<std::pair<std::string, absl::StatusOr<v1::Trace>>> traces;
  for (const char* name : {"resnet50_b16_fp32", "inception_v3_b16_fp32", "transformer_b32_fp32",
                           "transformer_b32_bf16", "gnmt_b32_fp32", "dcgan_b64_fp32"}) {
    traces.emplace_back(name, testing::LoadAgentFixture("h100_producers", name));
  }
  for (const auto& [name, batch] :
       std::vector<std::pair<std::string, uint32_t>>{{"resnet50_b64_fp32", 64},
                                                     {"transformer_b64_fp32", 64},
                                                     {"gnmt_b64_fp32", 64},
                                                     {"gpt2_b16_fp32", 16},
                                                     {"inception_v3_b64_fp32", 64}}) {
    traces.emplace_back("kineto " + name, testing::LoadKinetoFixture("h100", name, batch));
  }
  for (const auto& [name, loaded] : traces) {
    ASSERT_TRUE(loaded.ok()) << name << ": " << loaded.status();
    int accumulations = 0, producers = 0;
    for (const v1::Operation& op : loaded->operations()) {
      if (op.name() != "torch::autograd::AccumulateGrad") continue;
      ++accumulations;
      producers += op.has_gradient_producer();
    }
    EXPECT_GT(accumulations, 0) << name;
    EXPECT_EQ(producers, accumulations) << name;
    if (name.rfind("dcgan", 0) == 0) continue;
    const v1::DevicePrediction prediction = OnTheH100(*loaded);
    auto recorded = IterationFromTrace(*loaded, prediction);
    v1::Trace shapes_only = *loaded;
    for (v1::Operation& op : *shapes_only.mutable_operations()) op.clear_gradient_producer();
    auto guessed = IterationFromTrace(shapes_only, prediction);
    ASSERT_TRUE(recorded.ok() && guessed.ok()) << name;
    EXPECT_EQ(recorded->unmatched_params, 0) << name;
    ASSERT_EQ(recorded->iteration.params.size(), guessed->iteration.params.size()) << name;
    for (size_t i = 0; i < recorded->iteration.params.size(); ++i) {
      EXPECT_GE(recorded->iteration.params[i].ready_after_op,
                guessed->iteration.params[i].ready_after_op)
          << name << " parameter " << i;
    }
  }
}

TEST(DdpIterationTest, APredictionOfAnotherTraceOrWithoutGradientsIsRefused) {
  auto loaded = testing::LoadAgentFixture("h100_memory", "resnet50_b16_fp32");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const v1::Trace& trace = *loaded;
  v1::DevicePrediction summary = OnTheH100(trace);
  summary.clear_operations();
  EXPECT_EQ(IterationFromTrace(trace, summary).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Trace inference;
  inference.add_operations()->set_name("aten::linear");
  v1::DevicePrediction one;
  one.add_operations();
  EXPECT_EQ(IterationFromTrace(inference, one).status().code(), absl::StatusCode::kInvalidArgument);
}

class ParallelPredictionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices =
        DeviceDatabase::LoadFromFile(std::string(HABITAT_DATA_DIR) + "/devices.textproto");
    ASSERT_TRUE(devices.ok()) << devices.status();
    devices_ = std::make_unique<DeviceDatabase>(*std::move(devices));
    auto catalogs =
        CatalogSet::LoadFromDirectory(std::string(HABITAT_DATA_DIR) + "/catalogs", *devices_);
    ASSERT_TRUE(catalogs.ok()) << catalogs.status();
    catalogs_ = std::make_unique<CatalogSet>(*std::move(catalogs));
    auto trace = testing::LoadAgentFixture("h100_memory", "resnet50_b16_fp32");
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = *std::move(trace);
  }

  // The trace predicted on `id` (from the H100 it ran on), with its batch.
  v1::DevicePrediction On(const std::string& id) {
    auto prediction = PredictOnDevice(trace_, *devices_->Find("H100-SXM"), *devices_->Find(id));
    EXPECT_TRUE(prediction.ok()) << prediction.status();
    v1::DevicePrediction out = prediction.ok() ? *prediction : v1::DevicePrediction();
    out.set_batch_size(trace_.batch_size());
    return out;
  }

  v1::ParallelPrediction Parallel(const std::string& id, uint32_t gpus, uint32_t nodes,
                                  const char* catalog = "aws") {
    const v1::DevicePrediction single = On(id);
    v1::ParallelConfig config;
    config.set_gpus_per_node(gpus);
    config.set_nodes(nodes);
    const v1::PriceCatalog* priced = nullptr;
    if (catalog != nullptr) priced = *catalogs_->Get(catalog);
    return PredictParallel(IterationFromTrace(trace_, single), single, *devices_->Find(id), config,
                           priced, v1::PRICE_KIND_ON_DEMAND);
  }

  std::unique_ptr<DeviceDatabase> devices_;
  std::unique_ptr<CatalogSet> catalogs_;
  v1::Trace trace_;
};

TEST_F(ParallelPredictionTest, EightH100sInOneP5) {
  const v1::DevicePrediction single = On("H100-SXM");
  const v1::ParallelPrediction eight = Parallel("H100-SXM", 8, 1);
  ASSERT_TRUE(eight.unavailable().empty()) << eight.unavailable();
  EXPECT_EQ(eight.instance_type(), "p5.48xlarge");
  // 102 MB of gradients in 25 MiB buckets.
  EXPECT_EQ(eight.buckets(), 4u);
  EXPECT_EQ(eight.step_ns(), single.wall_time_ns() + eight.exposed_communication_ns());
  // At most every bucket's ring all-reduce, 2 x 7/8 x 102 MB at 370 GB/s
  // plus latencies and the host's launches (under 1 ms), and DDP's copies:
  // 2 x 161 gradient and 159 buffer copy kernels at 1.46 us, 2 x 2 x 102 MB
  // at 3 TB/s (0.6 ms) are exposed: under 1.6 ms.
  EXPECT_GE(eight.exposed_communication_ns(), 0);
  EXPECT_LT(eight.exposed_communication_ns(), 1'600'000);
  EXPECT_GT(eight.scaling_efficiency(), 0.5);
  EXPECT_LE(eight.scaling_efficiency(), 1.0);
  EXPECT_NEAR(eight.samples_per_second(), 8 * 16 / (eight.step_ns() / 1e9), 1e-6);
  EXPECT_TRUE(eight.has_price());
  EXPECT_NEAR(eight.cost_per_1000_samples(),
              eight.price_per_node_hour() / 3600 * 1000 / eight.samples_per_second(), 1e-12);
}

TEST_F(ParallelPredictionTest, AbsurdPredictedTimesAreUnavailableNotOverflowed) {
  // Saturated per-operation times (a hostile trace) sum without overflow
  // and the step is refused with the reason.
  v1::DevicePrediction single = On("H100-SXM");
  for (auto& op : *single.mutable_operations()) {
    op.set_predicted_forward_ns(std::numeric_limits<int64_t>::max());
    op.set_predicted_backward_ns(std::numeric_limits<int64_t>::max());
  }
  single.set_gpu_time_ns(std::numeric_limits<int64_t>::max());
  auto iteration = IterationFromTrace(trace_, single);
  ASSERT_TRUE(iteration.ok()) << iteration.status();
  EXPECT_LE(iteration->iteration.forward_ns, int64_t{1'000'000'000'000'000'000});
  v1::ParallelConfig config;
  config.set_gpus_per_node(8);
  const v1::ParallelPrediction eight =
      PredictParallel(iteration, single, *devices_->Find("H100-SXM"), config,
                      *catalogs_->Get("aws"), v1::PRICE_KIND_ON_DEMAND);
  EXPECT_NE(eight.unavailable().find("exceed 1e+15"), std::string::npos) << eight.unavailable();
}

TEST_F(ParallelPredictionTest, AcrossNodesTheNetworkAddsCommunication) {
  const v1::ParallelPrediction one = Parallel("A100-SXM-40GB", 8, 1);
  const v1::ParallelPrediction four = Parallel("A100-SXM-40GB", 8, 4);
  ASSERT_TRUE(four.unavailable().empty()) << four.unavailable();
  EXPECT_EQ(four.instance_type(), "p4d.24xlarge");
  EXPECT_GT(four.exposed_communication_ns(), one.exposed_communication_ns());
  EXPECT_LT(four.scaling_efficiency(), one.scaling_efficiency());
  // Without a catalog there is no network to cross.
  EXPECT_NE(Parallel("A100-SXM-40GB", 8, 2, nullptr).unavailable().find("no catalog"),
            std::string::npos);
  // One GPU is the single-GPU step.
  const v1::ParallelPrediction single = Parallel("A100-SXM-40GB", 1, 1);
  EXPECT_EQ(single.exposed_communication_ns(), 0);
  EXPECT_EQ(single.step_ns(), On("A100-SXM-40GB").wall_time_ns());
}

TEST(ParallelExpectedErrorTest, TheModelsMeasuredErrorJoinsTheGpusOwn) {
  v1::DevicePrediction single;
  // A measured origin has no error of its own: the model's alone.
  EXPECT_DOUBLE_EQ(ParallelExpectedErrorPercent(single, 8), kDdpErrorPercent);
  // Independent errors: the GPU's and the model's.
  single.set_expected_error_percent(6);
  EXPECT_DOUBLE_EQ(ParallelExpectedErrorPercent(single, 8), std::hypot(6, kDdpErrorPercent));
  // One GPU is the single-GPU step, with its error.
  EXPECT_DOUBLE_EQ(ParallelExpectedErrorPercent(single, 1), 6);
  // A host-bound step moves with DDP's host work, which is not modelled.
  single.set_host_bound(true);
  EXPECT_DOUBLE_EQ(ParallelExpectedErrorPercent(single, 2),
                   std::hypot(6, kDdpHostBoundErrorPercent));
  // A link whose speed is the server's adds half its span, independently.
  EXPECT_DOUBLE_EQ(ParallelExpectedErrorPercent(single, 2, 9),
                   std::sqrt(36 + kDdpHostBoundErrorPercent * kDdpHostBoundErrorPercent + 81));
  // An FSDP step its own timeline finds host-bound also moves with FSDP2's
  // host work per unit, whether or not the single-GPU step was host-bound.
  single.set_host_bound(false);
  EXPECT_DOUBLE_EQ(ParallelExpectedErrorPercent(single, 2, 0, true),
                   std::hypot(6, kFsdpHostBoundErrorPercent));
  EXPECT_GT(kFsdpHostBoundErrorPercent, kDdpHostBoundErrorPercent);
}

TEST_F(ParallelPredictionTest, EachStepCarriesItsExpectedError) {
  const v1::DevicePrediction a100 = On("A100-SXM-80GB");
  ASSERT_GT(a100.expected_error_percent(), 0);
  const v1::ParallelPrediction eight = Parallel("A100-SXM-80GB", 8, 1);
  ASSERT_TRUE(eight.unavailable().empty()) << eight.unavailable();
  EXPECT_DOUBLE_EQ(eight.expected_error_percent(), ParallelExpectedErrorPercent(a100, 8));
  EXPECT_GT(eight.expected_error_percent(), a100.expected_error_percent());
  EXPECT_DOUBLE_EQ(Parallel("A100-SXM-80GB", 1, 1).expected_error_percent(),
                   a100.expected_error_percent());
  // What cannot be predicted has no error either.
  EXPECT_EQ(Parallel("RTX4090", 4, 1).expected_error_percent(), 0);
}

TEST_F(ParallelPredictionTest, APcieNodeSpansItsLinksPublishedRange) {
  // The same L4 at the link's usual and at its lowest published bandwidth,
  // each as a link of one figure.
  const v1::DevicePrediction single = On("L4");
  v1::ParallelConfig config;
  config.set_gpus_per_node(4);
  const auto step_at = [&](double busbw) {
    v1::DeviceSpec l4 = *devices_->Find("L4");
    l4.mutable_interconnect()->set_allreduce_busbw_gbps(busbw);
    l4.mutable_interconnect()->clear_allreduce_busbw_low_gbps();
    const v1::ParallelPrediction p = PredictParallel(IterationFromTrace(trace_, single), single, l4,
                                                     config, nullptr, v1::PRICE_KIND_ON_DEMAND);
    EXPECT_TRUE(p.unavailable().empty()) << p.unavailable();
    EXPECT_FALSE(p.bandwidth_range());
    return p.step_ns();
  };
  const int64_t usual = step_at(24), slow = step_at(3.1);
  // 102 MB of gradients at 3.1 GB/s cannot all hide behind the backward pass.
  ASSERT_GT(slow, usual);
  const v1::ParallelPrediction four = Parallel("L4", 4, 1);
  ASSERT_TRUE(four.unavailable().empty()) << four.unavailable();
  EXPECT_TRUE(four.bandwidth_range());
  EXPECT_EQ(four.instance_type(), "g6.24xlarge");
  // The middle of the two, with an error that reaches both.
  EXPECT_NEAR(four.step_ns(), (usual + slow) / 2, 1);
  const double half_span = 100.0 * (slow - usual) / 2.0 / four.step_ns();
  EXPECT_NEAR(four.expected_error_percent(), ParallelExpectedErrorPercent(single, 4, half_span),
              1e-6);
  EXPECT_GE(four.step_ns() * (1 + four.expected_error_percent() / 100), slow);
  EXPECT_LE(four.step_ns() * (1 - four.expected_error_percent() / 100), usual);
  // An NVLink node's speed is its own.
  EXPECT_FALSE(Parallel("A100-SXM-80GB", 8, 1).bandwidth_range());
}

TEST_F(ParallelPredictionTest, AcrossNodesTheStepSpansTheNetworksPublishedShares) {
  const v1::DevicePrediction single = On("A100-SXM-40GB");
  const v1::ParallelPrediction four = Parallel("A100-SXM-40GB", 8, 4);
  ASSERT_TRUE(four.unavailable().empty()) << four.unavailable();
  EXPECT_TRUE(four.bandwidth_range());
  // p4d's 400 Gb/s shared by 8 GPUs carries 102 MB of gradients per step:
  // at 0.66 of the line rate the step is longer, so the error is wider than
  // the model's own.
  EXPECT_GT(four.expected_error_percent(), ParallelExpectedErrorPercent(single, 32));
  EXPECT_GT(four.exposed_communication_ns(),
            Parallel("A100-SXM-40GB", 8, 1).exposed_communication_ns());
}

TEST_F(ParallelPredictionTest, WhatTheDataCannotSupportSaysWhy) {
  EXPECT_NE(Parallel("RTX4090", 4, 1).unavailable().find("no interconnect figures"),
            std::string::npos);
  EXPECT_NE(Parallel("T4", 16, 1).unavailable().find("at most 8"), std::string::npos);
  EXPECT_NE(Parallel("H100-PCIE", 4, 1).unavailable().find("at most 2"), std::string::npos);
  EXPECT_TRUE(Parallel("H100-PCIE", 2, 1).unavailable().empty());
  const v1::ParallelPrediction no_network = Parallel("H100-SXM", 4, 2, "lambda");
  EXPECT_FALSE(no_network.unavailable().empty());
}

TEST_F(ParallelPredictionTest, TheCatalogsMultiGpuInstanceSizes) {
  EXPECT_EQ(CatalogInstanceSizes(**catalogs_->Get("aws"), "H100-SXM"), std::vector<uint32_t>{8});
  EXPECT_EQ(CatalogInstanceSizes(**catalogs_->Get("gcp"), "A100-SXM-40GB"),
            std::vector<uint32_t>{16});
  EXPECT_TRUE(CatalogInstanceSizes(**catalogs_->Get("aws"), "RTX4090").empty());
}

}  // namespace
}  // namespace habitat
