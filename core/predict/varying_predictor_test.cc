// The engine with the trained kernel-varying predictor
// (models/kernel_varying) on real ResNet-50 iterations captured on an H100:
// which passes the model predicts, in which math modes, never below the
// target's floor, and what it says about its own coverage.
#include "core/predict/varying_predictor.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "core/devices/device_rates.h"
#include "core/kernel_varying/features.h"
#include "core/kernel_varying/op_signature.h"
#include "core/predict/batch_scaling.h"
#include "core/predict/expected_error.h"
#include "core/predict/prediction_engine.h"
#include "core/scaling/wave_scaling.h"
#include "core/testing/trace_fixtures.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

// The arithmetic of the 8192^3 matmul the tests below predict, and its time
// at a GPU's sustained throughput in a mode.
constexpr double kMatmulFlop = 2.0 * 8192 * 8192 * 8192;
double SustainedMatmulNs(const v1::DeviceSpec& device, MathMode mode) {
  return kMatmulFlop / (SustainedTflops(device, mode) * 1e3);
}

class VaryingPredictorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices =
        DeviceDatabase::LoadFromFile(std::string(HABITAT_DATA_DIR) + "/devices.textproto");
    ASSERT_TRUE(devices.ok()) << devices.status();
    devices_ = std::make_unique<DeviceDatabase>(std::move(*devices));
    auto trace = testing::LoadKinetoFixture("h100", "resnet50_b16_fp32", 16);
    ASSERT_TRUE(trace.ok()) << trace.status();
    trace_ = std::move(*trace);
    auto varying = VaryingPredictor::Load(HABITAT_KERNEL_VARYING_DIR, 4096);
    ASSERT_TRUE(varying.ok()) << varying.status();
    varying_ = std::move(*varying);
  }

  const v1::DevicePrediction& For(const v1::PredictResponse& response, const std::string& id) {
    for (const auto& p : response.predictions()) {
      if (p.device_id() == id) return p;
    }
    ADD_FAILURE() << "no prediction for " << id;
    return response.predictions(0);
  }

  std::unique_ptr<DeviceDatabase> devices_;
  v1::Trace trace_;
  std::shared_ptr<VaryingPredictor> varying_;
};

TEST_F(VaryingPredictorTest, ConvolutionsComeFromTheModelAndSayWhetherItKnowsTheGpu) {
  PredictionEngine engine(devices_.get(), nullptr, varying_);
  PredictionQuery query;
  query.devices = {"V100-PCIE-32GB", "T4", "L4", "H200"};
  query.include_breakdown = true;
  auto response = engine.Predict(trace_, "", query);
  ASSERT_TRUE(response.ok()) << response.status();
  // fp32 conv2d and linear were measured on the V100 and the T4 (NeuSight),
  // never on an L4.
  for (const auto& [id, trained] : std::vector<std::pair<std::string, bool>>{
           {"V100-PCIE-32GB", true}, {"T4", true}, {"L4", false}}) {
    const auto& prediction = For(*response, id);
    int from_model = 0;
    for (const auto& op : prediction.operations()) {
      if (op.name() != "aten::conv2d") continue;
      if (op.method() != v1::PREDICTION_METHOD_KERNEL_VARYING) {
        // Only launch-bound convolutions fall back to wave scaling.
        EXPECT_EQ(op.method(), v1::PREDICTION_METHOD_WAVE_SCALING) << id;
        EXPECT_LT(op.origin_forward_ns(), varying_->model().min_origin_ns()) << id;
        continue;
      }
      ++from_model;
      EXPECT_EQ(op.predictor_trained_on_target(), trained) << id;
      EXPECT_GT(op.predicted_forward_ns(), 0) << id;
    }
    EXPECT_GT(from_model, 40) << id;  // ResNet-50 has 53 convolutions
    bool warned = false;
    for (const auto& w : prediction.warnings()) {
      warned = warned || absl::StrContains(w, "outside its training data");
    }
    EXPECT_EQ(warned, !trained) << id;
  }
  // The H200 differs from the H100 only in memory: same kernels, so its
  // convolutions are wave-scaled, not sent to the model.
  for (const auto& op : For(*response, "H200").operations()) {
    EXPECT_NE(op.method(), v1::PREDICTION_METHOD_KERNEL_VARYING) << op.name();
  }
  // An older, slower GPU takes longer for the same convolutions.
  EXPECT_GT(For(*response, "T4").gpu_time_ns(), 3 * For(*response, "H200").gpu_time_ns());
}

TEST_F(VaryingPredictorTest, RepeatedSignaturesAreEvaluatedOnceAndMemoised) {
  auto origin = devices_->Get("H100-SXM");
  auto a100 = devices_->Get("A100-SXM-80GB");
  ASSERT_TRUE(origin.ok() && a100.ok());
  auto first = varying_->PredictTrace(trace_, **origin, {*a100});
  ASSERT_TRUE(first.ok()) << first.status();
  const int64_t evaluated = varying_->memo_misses();
  // ResNet-50 repeats its bottleneck blocks: fewer distinct signatures than
  // covered passes.
  EXPECT_GT(evaluated, 0);
  EXPECT_LT(evaluated, static_cast<int64_t>((*first)[0].size()));
  auto second = varying_->PredictTrace(trace_, **origin, {*a100});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(varying_->memo_misses(), evaluated);
  EXPECT_EQ(varying_->memo_hits(), evaluated);
  for (const auto& [key, pass] : (*first)[0]) {
    EXPECT_EQ((*second)[0].at(key).predicted_ns, pass.predicted_ns);
  }
}

TEST_F(VaryingPredictorTest, OriginTargetGetsNothingFromTheModel) {
  auto origin = devices_->Get("H100-SXM");
  ASSERT_TRUE(origin.ok());
  auto tables = varying_->PredictTrace(trace_, **origin, {*origin});
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_TRUE((*tables)[0].empty());
  EXPECT_EQ(varying_->memo_misses(), 0);
}

TEST_F(VaryingPredictorTest, SameComputeTargetGetsNothingFromTheModel) {
  // The H200 runs the H100's kernels; the engine wave-scales them, so the
  // model is not evaluated for it.
  auto origin = devices_->Get("H100-SXM");
  auto h200 = devices_->Get("H200");
  ASSERT_TRUE(origin.ok() && h200.ok());
  auto tables = varying_->PredictTrace(trace_, **origin, {*h200});
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_TRUE((*tables)[0].empty());
  EXPECT_EQ(varying_->memo_misses(), 0);
}

// Every pass of `table` is consistent with the model, the features and the
// trace: modes, floor, expected error and coverage. Returns the passes per
// (family, origin mode, target mode).
std::map<std::string, int> CheckTable(const VaryingPassTable& table, const v1::Trace& trace,
                                      const v1::DeviceSpec& origin, const v1::DeviceSpec& target,
                                      const kernel_varying::KernelVaryingModel& model) {
  std::map<std::string, int> kinds;
  for (const auto& [key, pass] : table) {
    const v1::Operation& op = trace.operations(key / 2);
    const bool backward = key % 2 == 1;
    auto signature = kernel_varying::ExtractOpSignature(op);
    EXPECT_TRUE(signature.ok() && signature->has_value()) << op.name();
    if (!signature.ok() || !signature->has_value()) continue;
    const kernel_varying::Family family = (*signature)->family;
    const std::string where = absl::StrCat(op.name(), " #", key / 2, " -> ", target.id());
    EXPECT_EQ(pass.target_mode, TargetMathMode(pass.origin_mode, target)) << where;
    auto floor =
        kernel_varying::FloorNs(family, (*signature)->config, pass.target_mode, backward, target);
    EXPECT_TRUE(floor.ok()) << floor.status();
    if (!floor.ok()) continue;
    EXPECT_EQ(pass.floor_ns,
              static_cast<Nanoseconds>(std::ceil(*floor * (*signature)->direction_factor)))
        << where;
    // A pass whose auxiliary kernels are moved apart is floored by the
    // engine, once they are added back.
    if (!pass.auxiliary_apart) EXPECT_GE(pass.predicted_ns, pass.floor_ns) << where;
    if (pass.clamped_to_floor) {
      EXPECT_EQ(pass.predicted_ns, pass.floor_ns) << where;
    }
    const double family_error = model.ExpectedErrorPercent(family, target.id());
    if (pass.target_mode == pass.origin_mode) {
      EXPECT_EQ(pass.expected_error_percent, family_error) << where;
    } else {
      // A second step, its own error added in quadrature.
      EXPECT_DOUBLE_EQ(
          pass.expected_error_percent,
          std::hypot(family_error, model.ModeChangeErrorPercent(family, pass.origin_mode)))
          << where;
      EXPECT_GT(pass.expected_error_percent, family_error) << where;
    }
    EXPECT_EQ(pass.trained_on_target, model.TrainedOn(family, pass.target_mode, target.id()) &&
                                          model.TrainedOn(family, pass.origin_mode, origin.id()))
        << where;
    ++kinds[absl::StrCat(kernel_varying::FamilyName(family), " ", MathModeName(pass.origin_mode),
                         "->", MathModeName(pass.target_mode))];
  }
  return kinds;
}

TEST_F(VaryingPredictorTest, Fp32CaptureRunsConvolutionsInTf32AndFallsBackWithoutIt) {
  // PyTorch's defaults on the H100: cuDNN convolutions on TF32 tensor cores,
  // the classifier's GEMM on fp32 CUDA cores. The V100 has no TF32.
  auto origin = devices_->Get("H100-SXM");
  auto v100 = devices_->Get("V100-PCIE-32GB");
  auto l4 = devices_->Get("L4");
  ASSERT_TRUE(origin.ok() && v100.ok() && l4.ok());
  auto tables = varying_->PredictTrace(trace_, **origin, {*v100, *l4});
  ASSERT_TRUE(tables.ok()) << tables.status();
  const auto on_v100 = CheckTable((*tables)[0], trace_, **origin, **v100, varying_->model());
  const auto on_l4 = CheckTable((*tables)[1], trace_, **origin, **l4, varying_->model());
  EXPECT_GT(on_v100.count("conv2d tf32->fp32") ? on_v100.at("conv2d tf32->fp32") : 0, 40);
  EXPECT_GT(on_l4.count("conv2d tf32->tf32") ? on_l4.at("conv2d tf32->tf32") : 0, 40);
  for (const auto* kinds : {&on_v100, &on_l4}) {
    for (const auto& [kind, count] : *kinds) {
      EXPECT_TRUE(absl::StartsWith(kind, "conv2d tf32") || absl::StartsWith(kind, "linear fp32"))
          << kind;
    }
  }
}

TEST_F(VaryingPredictorTest, Bf16CaptureFallsBackToFp32WithoutBf16Units) {
  auto trace = testing::LoadKinetoFixture("h100", "resnet50_b64_bf16", 64);
  ASSERT_TRUE(trace.ok()) << trace.status();
  auto origin = devices_->Get("H100-SXM");
  auto t4 = devices_->Get("T4");
  auto a100 = devices_->Get("A100-SXM-80GB");
  ASSERT_TRUE(origin.ok() && t4.ok() && a100.ok());
  auto tables = varying_->PredictTrace(*trace, **origin, {*t4, *a100});
  ASSERT_TRUE(tables.ok()) << tables.status();
  const auto on_t4 = CheckTable((*tables)[0], *trace, **origin, **t4, varying_->model());
  const auto on_a100 = CheckTable((*tables)[1], *trace, **origin, **a100, varying_->model());
  EXPECT_GT(on_t4.count("conv2d bf16->fp32") ? on_t4.at("conv2d bf16->fp32") : 0, 40);
  EXPECT_GT(on_a100.count("conv2d bf16->bf16") ? on_a100.at("conv2d bf16->bf16") : 0, 40);
}

// An 8192^3 fp32 matmul (aten::mm) whose forward pass took `time_ns` on the
// origin in one kernel: far faster than any GPU can do it.
v1::Trace ImpossiblyFastMatmul(Nanoseconds time_ns) {
  v1::Trace trace;
  v1::Operation* op = trace.add_operations();
  op->set_name("aten::mm");
  for (const char* name : {"0", "1"}) {
    v1::Argument* a = op->add_arguments();
    a->set_name(name);
    a->mutable_tensor()->add_shape(8192);
    a->mutable_tensor()->add_shape(8192);
    a->mutable_tensor()->set_dtype("float");
  }
  op->mutable_forward()->set_time_ns(time_ns);
  v1::Kernel* kernel = op->mutable_forward()->add_kernels();
  kernel->set_name("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_cublas");
  kernel->mutable_grid()->set_x(4096);
  kernel->mutable_grid()->set_y(1);
  kernel->mutable_grid()->set_z(1);
  kernel->mutable_block()->set_x(256);
  kernel->mutable_block()->set_y(1);
  kernel->mutable_block()->set_z(1);
  kernel->set_registers_per_thread(128);
  kernel->set_duration_ns(time_ns);
  return trace;
}

TEST_F(VaryingPredictorTest, ImpossiblyFastOriginIsClampedToTheTargetFloor) {
  // An 8192^3 fp32 matmul measured at 25 us: 1.1 PFLOP/s, which no GPU
  // does. Whatever the model says, the A100 cannot beat its datasheet peak.
  // No kernel recorded: the mode comes from the dtypes and PyTorch's default.
  v1::Trace trace = ImpossiblyFastMatmul(25'000);
  trace.mutable_operations(0)->mutable_forward()->clear_kernels();
  auto origin = devices_->Get("H100-SXM");
  auto a100 = devices_->Get("A100-SXM-80GB");
  ASSERT_TRUE(origin.ok() && a100.ok());
  auto tables = varying_->PredictTrace(trace, **origin, {*a100});
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ((*tables)[0].size(), 1u);
  const VaryingPassPrediction& pass = (*tables)[0].at(VaryingPassKey(0, false));
  EXPECT_EQ(pass.origin_mode, MathMode::kFp32);  // PyTorch's cuBLAS default
  EXPECT_EQ(pass.target_mode, MathMode::kFp32);
  EXPECT_TRUE(pass.clamped_to_floor);
  // 2 * 8192^3 FLOP at 19.5 TFLOP/s.
  EXPECT_EQ(pass.floor_ns, static_cast<Nanoseconds>(std::ceil(kMatmulFlop / 19.5e3)));
  EXPECT_EQ(pass.predicted_ns, pass.floor_ns);
}

bool HasWarning(const v1::DevicePrediction& prediction, absl::string_view text) {
  for (const auto& w : prediction.warnings()) {
    if (absl::StrContains(w, text)) return true;
  }
  return false;
}

TEST_F(VaryingPredictorTest, Tf32OnTheH100RunsFp32OnAV100AndTheResponseSaysSo) {
  PredictionEngine engine(devices_.get(), nullptr, varying_);
  PredictionQuery query;
  query.devices = {"H100-SXM", "V100-PCIE-32GB", "L4"};
  query.include_breakdown = true;
  auto response = engine.Predict(trace_, "", query);
  ASSERT_TRUE(response.ok()) << response.status();
  const auto& v100 = For(*response, "V100-PCIE-32GB");
  int fallbacks = 0, from_model = 0;
  Nanoseconds fallback_origin_ns = 0, origin_total = 0;
  for (const auto& op : v100.operations()) {
    origin_total += op.origin_forward_ns() + op.origin_backward_ns();
    if (op.name() != "aten::conv2d") continue;
    // Every convolution has a signature: modes whether the model or wave
    // scaling predicted it.
    EXPECT_EQ(op.origin_math_mode(), "tf32") << op.index();
    EXPECT_EQ(op.target_math_mode(), "fp32") << op.index();
    EXPECT_GT(op.expected_error_percent(), 0) << op.index();
    ++fallbacks;
    fallback_origin_ns += op.origin_forward_ns() + op.origin_backward_ns();
    if (op.method() == v1::PREDICTION_METHOD_KERNEL_VARYING) ++from_model;
  }
  EXPECT_EQ(fallbacks, 53);
  EXPECT_GT(from_model, 40);
  const std::string warning = absl::StrFormat(
      "%d operation(s), %.1f%% of the origin GPU time, ran in TF32 on H100-SXM and run in fp32 "
      "on the target GPU, which has no TF32 tensor cores",
      fallbacks, 100.0 * static_cast<double>(fallback_origin_ns) / origin_total);
  EXPECT_TRUE(HasWarning(v100, warning)) << warning;
  int fallback_lines = 0;
  for (const auto& w : v100.warnings()) fallback_lines += absl::StrContains(w, "tensor cores");
  EXPECT_EQ(fallback_lines, 1);  // one line for all 53, not one per op
  EXPECT_GT(v100.expected_error_percent(), 0);
  // The L4 has TF32 tensor cores: same mode, no fallback.
  const auto& l4 = For(*response, "L4");
  EXPECT_FALSE(HasWarning(l4, "tensor cores"));
  for (const auto& op : l4.operations()) {
    if (op.name() == "aten::conv2d") {
      EXPECT_EQ(op.target_math_mode(), "tf32") << op.index();
    }
  }
  // The origin: measured, no modes, no error; its one warning says that its
  // wall time comes from the torch.profiler step (no --wall-ns).
  const auto& h100 = For(*response, "H100-SXM");
  EXPECT_EQ(h100.expected_error_percent(), 0.0);
  ASSERT_EQ(h100.warnings_size(), 1);
  EXPECT_TRUE(absl::StartsWith(h100.warnings(0), "profiled:")) << h100.warnings(0);
  for (const auto& op : h100.operations()) {
    EXPECT_TRUE(op.origin_math_mode().empty()) << op.name();
    EXPECT_EQ(op.expected_error_percent(), 0.0) << op.name();
  }
}

TEST_F(VaryingPredictorTest, ModelPredictionsTakeTheModelsErrorWeightedByPassTime) {
  auto origin = devices_->Get("H100-SXM");
  auto t4 = devices_->Get("T4");
  ASSERT_TRUE(origin.ok() && t4.ok());
  auto tables = varying_->PredictTrace(trace_, **origin, {*t4});
  ASSERT_TRUE(tables.ok()) << tables.status();
  auto prediction = PredictOnDevice(trace_, **origin, **t4, std::nullopt, &(*tables)[0]);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  int checked = 0;
  for (const auto& op : prediction->operations()) {
    if (op.method() != v1::PREDICTION_METHOD_KERNEL_VARYING) continue;
    double weighted = 0, total = 0;
    for (bool backward : {false, true}) {
      const Nanoseconds ns = backward ? op.predicted_backward_ns() : op.predicted_forward_ns();
      auto it = (*tables)[0].find(VaryingPassKey(static_cast<int>(op.index()), backward));
      const double error = it != (*tables)[0].end() ? it->second.expected_error_percent
                                                    : kKernelVaryingWaveScaledErrorPercent;
      weighted += error * static_cast<double>(ns);
      total += static_cast<double>(ns);
    }
    EXPECT_NEAR(op.expected_error_percent(), weighted / total, 1e-9) << op.index();
    ++checked;
  }
  EXPECT_GT(checked, 40);
  EXPECT_NEAR(prediction->expected_error_percent(), IterationExpectedErrorPercent(*prediction),
              1e-12);
  EXPECT_GT(prediction->expected_error_percent(), kKernelAlikeErrorPercent);
}

TEST_F(VaryingPredictorTest, ModelPredictionBelowTheFloorIsClampedAndFlagged) {
  const v1::Trace trace = ImpossiblyFastMatmul(25'000);  // covered by the model
  auto origin = devices_->Get("H100-SXM");
  auto a100 = devices_->Get("A100-SXM-80GB");
  ASSERT_TRUE(origin.ok() && a100.ok());
  auto tables = varying_->PredictTrace(trace, **origin, {*a100});
  ASSERT_TRUE(tables.ok()) << tables.status();
  const VaryingPassPrediction& pass = (*tables)[0].at(VaryingPassKey(0, false));
  ASSERT_TRUE(pass.clamped_to_floor);
  auto prediction = PredictOnDevice(trace, **origin, **a100, std::nullopt, &(*tables)[0]);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  const auto& op = prediction->operations(0);
  EXPECT_EQ(op.method(), v1::PREDICTION_METHOD_KERNEL_VARYING);
  EXPECT_TRUE(op.at_hardware_limit());
  EXPECT_EQ(op.predicted_forward_ns(), pass.floor_ns);
  EXPECT_EQ(op.origin_math_mode(), "fp32");
  EXPECT_EQ(op.target_math_mode(), "fp32");
  EXPECT_NEAR(op.expected_error_percent(), pass.expected_error_percent, 1e-9);
  EXPECT_TRUE(HasWarning(*prediction,
                         "1 operation(s), 100.0% of the origin GPU time, were predicted faster "
                         "than the target GPU's datasheet peak FLOPS"));
}

TEST_F(VaryingPredictorTest, LargeFp32GemmIsCappedNearTheTargetsSustainedRoofline) {
  // The 8192^3 fp32 matmul at 500 ms on the H100 (2.2 TFLOP/s, as if
  // throttled): however slow the origin was, a T4 runs a GEMM this large
  // near the throughput measured on such GEMMs, so the prediction stops at
  // the model's ceiling above the T4's sustained roofline.
  const v1::Trace trace = ImpossiblyFastMatmul(500'000'000);
  auto origin = devices_->Get("H100-SXM");
  auto t4 = devices_->Get("T4");
  ASSERT_TRUE(origin.ok() && t4.ok());
  auto tables = varying_->PredictTrace(trace, **origin, {*t4});
  ASSERT_TRUE(tables.ok()) << tables.status();
  const VaryingPassPrediction& pass = (*tables)[0].at(VaryingPassKey(0, false));
  EXPECT_TRUE(pass.large_gemm);
  EXPECT_TRUE(pass.capped_at_ceiling);
  EXPECT_FALSE(pass.clamped_to_floor);
  const double sustained_ns = SustainedMatmulNs(**t4, MathMode::kFp32);
  EXPECT_EQ(pass.predicted_ns, std::llround(sustained_ns * varying_->model().large_gemm_ceiling()));
  auto prediction = PredictOnDevice(trace, **origin, **t4, std::nullopt, &(*tables)[0]);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_EQ(prediction->operations(0).predicted_forward_ns(), pass.predicted_ns);
  EXPECT_FALSE(prediction->operations(0).at_hardware_limit());
  EXPECT_TRUE(HasWarning(*prediction,
                         "1 operation(s), 100.0% of the origin GPU time, are large GEMMs "
                         "on the target GPU whose origin time, moved by the two GPUs' "
                         "sustained GEMM throughputs, came out slower"));
  // A 3x3 matmul is no large GEMM: no ceiling, whatever the origin took.
  v1::Trace small = ImpossiblyFastMatmul(500'000'000);
  for (auto& argument : *small.mutable_operations(0)->mutable_arguments()) {
    argument.mutable_tensor()->set_shape(0, 3);
    argument.mutable_tensor()->set_shape(1, 3);
  }
  auto small_tables = varying_->PredictTrace(small, **origin, {*t4});
  ASSERT_TRUE(small_tables.ok()) << small_tables.status();
  EXPECT_FALSE((*small_tables)[0].at(VaryingPassKey(0, false)).large_gemm);
  EXPECT_FALSE((*small_tables)[0].at(VaryingPassKey(0, false)).capped_at_ceiling);
  auto small_prediction = PredictOnDevice(small, **origin, **t4, std::nullopt, &(*small_tables)[0]);
  ASSERT_TRUE(small_prediction.ok()) << small_prediction.status();
  EXPECT_FALSE(HasWarning(*small_prediction, "large fp32 GEMMs"));
}

TEST_F(VaryingPredictorTest, LargeFp32GemmMovesByTheSustainedThroughputsAlone) {
  // The 8192^3 fp32 matmul at 24 ms on the H100 (45.8 TFLOP/s, 1.13x its
  // sustained roofline): the V100's sustained fp32 GEMM throughput is
  // measured on such GEMMs, so the prediction is the origin time times the
  // two throughputs' ratio, the model's correction left out.
  const Nanoseconds origin_ns = 24'000'000;
  const v1::Trace trace = ImpossiblyFastMatmul(origin_ns);
  auto origin = devices_->Get("H100-SXM");
  auto v100 = devices_->Get("V100-SXM2");
  ASSERT_TRUE(origin.ok() && v100.ok());
  auto tables = varying_->PredictTrace(trace, **origin, {*v100});
  ASSERT_TRUE(tables.ok()) << tables.status();
  const VaryingPassPrediction& pass = (*tables)[0].at(VaryingPassKey(0, false));
  EXPECT_TRUE(pass.large_gemm);
  EXPECT_FALSE(pass.capped_at_ceiling);
  EXPECT_FALSE(pass.clamped_to_floor);
  const double expected = static_cast<double>(origin_ns) *
                          SustainedTflops(**origin, MathMode::kFp32) /
                          SustainedTflops(**v100, MathMode::kFp32);
  EXPECT_NEAR(static_cast<double>(pass.predicted_ns), expected, 2.0);
  auto prediction = PredictOnDevice(trace, **origin, **v100, std::nullopt, &(*tables)[0]);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_FALSE(HasWarning(*prediction, "which no measurement gives"));
  // No sustained throughput measured on the RTX 2070: the assumed fraction
  // of its peak moves the GEMM, and the response says so.
  auto rtx2070 = devices_->Get("RTX2070");
  ASSERT_TRUE(rtx2070.ok());
  ASSERT_EQ((*rtx2070)->measured_fp32_gemm_tflops(), 0);
  auto unmeasured = varying_->PredictTrace(trace, **origin, {*rtx2070});
  ASSERT_TRUE(unmeasured.ok()) << unmeasured.status();
  EXPECT_TRUE((*unmeasured)[0].at(VaryingPassKey(0, false)).large_gemm);
  auto guessed = PredictOnDevice(trace, **origin, **rtx2070, std::nullopt, &(*unmeasured)[0]);
  ASSERT_TRUE(guessed.ok()) << guessed.status();
  EXPECT_TRUE(HasWarning(*guessed,
                         "1 operation(s), 100.0% of the origin GPU time, are large fp32 GEMMs on "
                         "the target GPU, moved by its sustained fp32 GEMM throughput, which no "
                         "measurement gives for it: 0.75 of its datasheet peak is assumed"));
}

// The 8192^3 matmul in TF32 on the H100 (allow_tf32, cuBLAS's TF32 kernel),
// predicted on `target_id` at two origin times: each time the typical
// multiple of the target's sustained roofline in `target_mode`, whatever the
// origin took. Returns the last prediction on the device.
absl::StatusOr<v1::DevicePrediction> ExpectTf32GemmAtTheTypicalMultiple(
    const DeviceDatabase& devices, const VaryingPredictor& varying, const std::string& target_id,
    MathMode target_mode) {
  auto origin = devices.Get("H100-SXM");
  auto target = devices.Get(target_id);
  if (!origin.ok() || !target.ok()) return absl::NotFoundError("device");
  const double sustained_ns = SustainedMatmulNs(**target, target_mode);
  absl::StatusOr<v1::DevicePrediction> prediction = absl::UnknownError("not predicted");
  for (Nanoseconds origin_ns : {Nanoseconds{3'000'000}, Nanoseconds{9'000'000}}) {
    v1::Trace trace = ImpossiblyFastMatmul(origin_ns);
    trace.mutable_math()->set_matmul_tf32(true);
    trace.mutable_operations(0)->mutable_forward()->mutable_kernels(0)->set_name(
        "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_cublas");
    auto tables = varying.PredictTrace(trace, **origin, {*target});
    if (!tables.ok()) return tables.status();
    const VaryingPassPrediction& pass = (*tables)[0].at(VaryingPassKey(0, false));
    EXPECT_EQ(pass.origin_mode, MathMode::kTf32);
    EXPECT_EQ(pass.target_mode, target_mode);
    EXPECT_TRUE(pass.large_gemm);
    EXPECT_FALSE(pass.capped_at_ceiling);
    EXPECT_NEAR(static_cast<double>(pass.predicted_ns),
                sustained_ns * varying.model().large_gemm_typical(), 1.0)
        << target_id << " from " << origin_ns << " ns";
    prediction = PredictOnDevice(trace, **origin, **target, std::nullopt, &(*tables)[0]);
  }
  return prediction;
}

TEST_F(VaryingPredictorTest, LargeGemmInAnotherModeOnTheOriginRunsAtTheTypicalMultiple) {
  // The V100 runs the H100's TF32 matmul in fp32: how far the H100 ran from
  // its TF32 roofline says nothing of the V100's CUDA cores.
  auto prediction =
      ExpectTf32GemmAtTheTypicalMultiple(*devices_, *varying_, "V100-SXM2", MathMode::kFp32);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
}

TEST_F(VaryingPredictorTest, LargeTf32GemmOnAnotherArchitectureRunsAtTheTypicalMultiple) {
  // An RTX 3090 runs it in TF32 too, but the model has no TF32 GEMM of any
  // GPU, and the H100's distance from its TF32 roofline is its own
  // kernels'. No TF32 throughput is measured for the 3090: the response
  // says what is assumed.
  ASSERT_EQ(MeasuredGemmTflops(**devices_->Get("RTX3090"), MathMode::kTf32), 0);
  auto prediction =
      ExpectTf32GemmAtTheTypicalMultiple(*devices_, *varying_, "RTX3090", MathMode::kTf32);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_TRUE(HasWarning(*prediction,
                         "1 operation(s), 100.0% of the origin GPU time, are large TF32 GEMMs "
                         "on the target GPU, moved by its sustained TF32 GEMM throughput, "
                         "which no measurement gives for it: 0.75 of its datasheet peak is "
                         "assumed"));
  EXPECT_FALSE(HasWarning(*prediction, "large fp32 GEMMs"));
}

TEST_F(VaryingPredictorTest, WaveScaledKernelVaryingPassIsKeptAtTheFloorToo) {
  // Shorter than min_origin_ns: the model leaves the pass to wave scaling,
  // which would predict microseconds for what takes the A100 56 ms at peak.
  const v1::Trace trace = ImpossiblyFastMatmul(10'000);
  ASSERT_LT(10'000, varying_->model().min_origin_ns());
  auto origin = devices_->Get("H100-SXM");
  auto a100 = devices_->Get("A100-SXM-80GB");
  ASSERT_TRUE(origin.ok() && a100.ok());
  auto tables = varying_->PredictTrace(trace, **origin, {*a100});
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_TRUE((*tables)[0].empty());
  auto limit = VaryingPassLimitFor(trace, trace.operations(0), false, **origin, **a100);
  ASSERT_TRUE(limit.has_value());
  // 2 * 8192^3 FLOP at 19.5 TFLOP/s.
  EXPECT_EQ(limit->floor_ns, static_cast<Nanoseconds>(std::ceil(kMatmulFlop / 19.5e3)));
  auto prediction = PredictOnDevice(trace, **origin, **a100, std::nullopt, &(*tables)[0]);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  const auto& op = prediction->operations(0);
  EXPECT_EQ(op.method(), v1::PREDICTION_METHOD_WAVE_SCALING);
  EXPECT_TRUE(op.at_hardware_limit());
  EXPECT_EQ(op.predicted_forward_ns(), limit->floor_ns);
  EXPECT_EQ(op.origin_math_mode(), "fp32");
  EXPECT_EQ(op.target_math_mode(), "fp32");
  EXPECT_EQ(op.expected_error_percent(), kKernelVaryingWaveScaledErrorPercent);
  EXPECT_TRUE(HasWarning(*prediction, "were raised to that limit"));
  // The same op on a same-compute target is wave-scaled as before: no floor.
  auto h200 = devices_->Get("H200");
  ASSERT_TRUE(h200.ok());
  auto same = PredictOnDevice(trace, **origin, **h200, std::nullopt, &(*tables)[0]);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_FALSE(same->operations(0).at_hardware_limit());
  EXPECT_LT(same->operations(0).predicted_forward_ns(), 10'000);
}

TEST_F(VaryingPredictorTest, SameComputeTargetsPredictTheSameWithOrWithoutTheModel) {
  for (const auto& [from, to, fixture] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"H100-SXM", "H200", "h100"}, {"H200", "H100-SXM", "h200"}}) {
    auto trace = testing::LoadKinetoFixture(fixture, "resnet50_b16_fp32", 16);
    ASSERT_TRUE(trace.ok()) << trace.status();
    auto origin = devices_->Get(from);
    auto target = devices_->Get(to);
    ASSERT_TRUE(origin.ok() && target.ok());
    auto tables = varying_->PredictTrace(*trace, **origin, {*target});
    ASSERT_TRUE(tables.ok()) << tables.status();
    auto with = PredictOnDevice(*trace, **origin, **target, std::nullopt, &(*tables)[0]);
    auto without = PredictOnDevice(*trace, **origin, **target);
    ASSERT_TRUE(with.ok() && without.ok());
    EXPECT_EQ(with->SerializeAsString(), without->SerializeAsString()) << from << "->" << to;
    EXPECT_DOUBLE_EQ(with->expected_error_percent(), kSameComputeUnitsErrorPercent);
  }
}

TEST(SameChipTest, SameArchitectureSmsAndL2) {
  auto devices = DeviceDatabase::LoadFromFile(std::string(HABITAT_DATA_DIR) + "/devices.textproto");
  ASSERT_TRUE(devices.ok()) << devices.status();
  auto get = [&](const char* id) { return **devices->Get(id); };
  EXPECT_TRUE(SameChip(get("V100-SXM2"), get("V100-PCIE-32GB")));
  EXPECT_TRUE(SameChip(get("A100-SXM-80GB"), get("A100-PCIE-40GB")));
  EXPECT_FALSE(SameChip(get("H100-PCIE"), get("H100-SXM")));  // 114 and 132 SMs
  EXPECT_FALSE(SameChip(get("V100-SXM2"), get("P100")));
}

// The V100 SXM2 is in no training data; the V100 PCIe, the same chip at a
// lower clock and power limit, is. A pass on the SXM2 is the PCIe card's
// prediction moved by the two GPUs' sustained rooflines.
TEST_F(VaryingPredictorTest, UntrainedTargetIsPredictedOnItsTrainedSameChipSibling) {
  const v1::DeviceSpec& h100 = **devices_->Get("H100-SXM");
  const v1::DeviceSpec& sxm2 = **devices_->Get("V100-SXM2");
  const v1::DeviceSpec& pcie = **devices_->Get("V100-PCIE-32GB");
  const std::vector<std::vector<const v1::DeviceSpec*>> siblings = {{&pcie}, {}};
  auto tables = varying_->PredictTrace(trace_, h100, {&sxm2, &pcie}, nullptr, &siblings);
  ASSERT_TRUE(tables.ok()) << tables.status();
  int compared = 0;
  for (const auto& [key, on_sxm2] : (*tables)[0]) {
    EXPECT_EQ(on_sxm2.sibling_id, "V100-PCIE-32GB");
    EXPECT_FALSE(on_sxm2.target_in_training);
    const VaryingPassPrediction& on_pcie = (*tables)[1].at(key);
    const v1::Operation& op = trace_.operations(key / 2);
    auto signature = kernel_varying::ExtractOpSignature(op);
    ASSERT_TRUE(signature.ok() && signature->has_value());
    double error =
        std::hypot(varying_->model().ExpectedErrorPercent((*signature)->family, "V100-PCIE-32GB"),
                   kSiblingStepErrorPercent);
    if (on_sxm2.origin_mode != on_sxm2.target_mode) {  // TF32 convolutions on the H100
      error = std::hypot(error, varying_->model().ModeChangeErrorPercent((*signature)->family,
                                                                         on_sxm2.origin_mode));
    }
    EXPECT_DOUBLE_EQ(on_sxm2.expected_error_percent, error);
    if (on_sxm2.clamped_to_floor || on_pcie.clamped_to_floor || on_sxm2.large_gemm) continue;
    auto step =
        kernel_varying::RooflineRatio((*signature)->family, (*signature)->config, MathMode::kFp32,
                                      MathMode::kFp32, key % 2 == 1, pcie, sxm2);
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_NEAR(static_cast<double>(on_sxm2.predicted_ns),
                static_cast<double>(on_pcie.predicted_ns) * *step,
                1e-6 * static_cast<double>(on_pcie.predicted_ns) + 2)
        << op.name();
    ++compared;
  }
  EXPECT_GT(compared, 40);
  // Without siblings the trees extrapolate to the SXM2 itself (the memo
  // keeps the two apart).
  auto alone = varying_->PredictTrace(trace_, h100, {&sxm2});
  ASSERT_TRUE(alone.ok()) << alone.status();
  int differ = 0;
  for (const auto& [key, pass] : (*alone)[0]) {
    EXPECT_TRUE(pass.sibling_id.empty());
    differ += pass.predicted_ns != (*tables)[0].at(key).predicted_ns;
  }
  EXPECT_GT(differ, 40);

  // Through the engine: the SXM2 (more clock, same memory) is faster, and
  // the response says how it was predicted.
  PredictionEngine engine(devices_.get(), nullptr, varying_);
  PredictionQuery query;
  query.devices = {"V100-SXM2", "V100-PCIE-32GB"};
  auto response = engine.Predict(trace_, "", query);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_LT(For(*response, "V100-SXM2").gpu_time_ns(),
            For(*response, "V100-PCIE-32GB").gpu_time_ns());
  EXPECT_TRUE(HasWarning(For(*response, "V100-SXM2"), "model on V100-PCIE-32GB, which has"));
  EXPECT_FALSE(HasWarning(For(*response, "V100-SXM2"), "outside its training data"));
}

TEST(VaryingPredictorLoad, MissingModelNamesTheFile) {
  auto varying = VaryingPredictor::Load("/nonexistent/kernel_varying", 16);
  ASSERT_FALSE(varying.ok());
  EXPECT_TRUE(absl::StrContains(varying.status().message(), "/nonexistent/kernel_varying"))
      << varying.status();
}

// The agent's re-runs at other batches move a pass by what the origin's
// libraries measured, not by a model, and on the origin itself (or a
// same-compute GPU) nothing else bounds the result: it must stay above the
// origin's floor at the new shapes by itself. The floor's memory term is
// DRAM traffic at the datasheet bandwidth; a working set that fits the L2
// can beat it (the traced bf16 ResNet-50 1x1 convolutions run at 0.98 of
// it), so there only the compute term binds.
TEST_F(VaryingPredictorTest, ReRunScaledPassesStayAboveTheOriginFloor) {
  auto h100 = devices_->Get("H100-SXM");
  ASSERT_TRUE(h100.ok());
  v1::DeviceSpec compute_only = **h100;
  compute_only.set_memory_bandwidth_gbps(1e12);
  int checked = 0, in_l2 = 0;
  double lowest = 1e9;
  for (const auto& [model, batch] : testing::AgentSuiteBatches()) {
    for (const std::string precision : {"fp32", "bf16"}) {
      const std::string name = model + "_b" + std::to_string(batch) + "_" + precision;
      auto trace = testing::LoadAgentFixture("h100_batch_rerun", name);
      ASSERT_TRUE(trace.ok()) << trace.status();
      for (const double factor : {0.5, 2.0, 4.0}) {
        auto scaled = ScaleTraceToBatch(*trace, static_cast<uint32_t>(batch * factor));
        ASSERT_TRUE(scaled.ok()) << scaled.status();
        for (const v1::Operation& op : scaled->trace.operations()) {
          for (const bool backward : {false, true}) {
            if (backward && !op.has_backward()) continue;
            const v1::Pass& pass = backward ? op.backward() : op.forward();
            if (pass.batch_reruns().empty()) continue;
            auto full = VaryingPassLimitFor(scaled->trace, op, backward, **h100, **h100);
            auto compute = VaryingPassLimitFor(scaled->trace, op, backward, **h100, compute_only);
            if (!full.has_value() || !compute.has_value() || full->floor_ns <= 0) continue;
            ++checked;
            const double dram_bytes = full->floor_ns * (*h100)->memory_bandwidth_gbps();
            const bool fits_l2 = full->floor_ns > compute->floor_ns &&
                                 dram_bytes <= static_cast<double>((*h100)->l2_cache_bytes());
            in_l2 += fits_l2;
            lowest = std::min(lowest, static_cast<double>(pass.time_ns()) / full->floor_ns);
            EXPECT_GE(pass.time_ns(), fits_l2 ? compute->floor_ns : full->floor_ns)
                << name << " x" << factor << " " << op.name() << (backward ? " backward" : "");
          }
        }
      }
    }
  }
  std::printf("%d re-run-scaled passes (%d within the L2); the closest at %.2fx its floor\n",
              checked, in_l2, lowest);
  EXPECT_GT(checked, 4000);
}

// A memory-bound fp16 matmul (aten::mm, [1048576 x 64] x [64 x 64]) whose
// forward pass took `time_ns` on the origin in one kernel.
v1::Trace SmallHalfMatmul(Nanoseconds time_ns) {
  v1::Trace trace = ImpossiblyFastMatmul(time_ns);
  v1::Operation* op = trace.mutable_operations(0);
  const int64_t shapes[2][2] = {{1 << 20, 64}, {64, 64}};
  for (int i = 0; i < 2; ++i) {
    v1::TensorArgument* tensor = op->mutable_arguments(i)->mutable_tensor();
    tensor->clear_shape();
    tensor->add_shape(shapes[i][0]);
    tensor->add_shape(shapes[i][1]);
    tensor->set_dtype("c10::Half");
  }
  op->mutable_forward()->mutable_kernels(0)->set_name(
      "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x64x64_cublas");
  return trace;
}

TEST_F(VaryingPredictorTest, HalfGemmOutsideTheDataMovesItsRooflineAndItsLatencyApart) {
  // The RTX 3090 has no fp16 measurements in the model's data: the share of
  // the pass the sustained roofline accounts for moves by the roofline
  // ratio, the rest by SM count x sustained clock, whatever the trees say.
  auto origin = devices_->Get("H200");
  auto target = devices_->Get("RTX3090");
  ASSERT_TRUE(origin.ok() && target.ok());
  auto signature = kernel_varying::ExtractOpSignature(SmallHalfMatmul(1).operations(0));
  ASSERT_TRUE(signature.ok() && signature->has_value());
  ASSERT_FALSE(varying_->model().TrainedOn((*signature)->family, MathMode::kFp16, "RTX3090"));
  auto roofline = [&](const v1::DeviceSpec& d) {
    return *kernel_varying::SustainedRooflineNs((*signature)->family, (*signature)->config,
                                                MathMode::kFp16, false, d);
  };
  const double r_o = roofline(**origin), r_t = roofline(**target);
  const double latency = (*origin)->sm_count() * SustainedClockMhz(**origin) /
                         ((*target)->sm_count() * SustainedClockMhz(**target));
  EXPECT_GT(latency, 1.0);
  for (double multiple : {2.0, 5.0}) {
    const auto origin_ns = static_cast<Nanoseconds>(std::llround(multiple * r_o));
    auto tables = varying_->PredictTrace(SmallHalfMatmul(origin_ns), **origin, {*target});
    ASSERT_TRUE(tables.ok()) << tables.status();
    const VaryingPassPrediction& pass = (*tables)[0].at(VaryingPassKey(0, false));
    EXPECT_EQ(pass.target_mode, MathMode::kFp16);
    EXPECT_FALSE(pass.large_gemm);
    EXPECT_NEAR(static_cast<double>(pass.predicted_ns),
                r_t + (static_cast<double>(origin_ns) - r_o) * latency, 2.0)
        << multiple << "x its roofline on the origin";
    EXPECT_TRUE(pass.split_at_roofline);
    const v1::Trace trace = SmallHalfMatmul(origin_ns);
    auto prediction = PredictOnDevice(trace, **origin, **target, std::nullopt, &(*tables)[0]);
    ASSERT_TRUE(prediction.ok()) << prediction.status();
    EXPECT_TRUE(HasWarning(*prediction,
                           "1 operation(s), 100.0% of the origin GPU time, are fp16 GEMMs the "
                           "kernel-varying model has no measurements of on this GPU"));
    EXPECT_FALSE(HasWarning(*prediction, "it extrapolated from the GPUs' specs"));
  }
}

}  // namespace
}  // namespace habitat
