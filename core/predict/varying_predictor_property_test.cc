// Properties of the kernel-varying predictions over a sweep, through the
// real loaded model: every family from tiny to huge shapes (odd sizes,
// 1-row GEMMs, 1x1/3x3/5x5/7x7 convolutions, a bidirectional LSTM,
// long-sequence attention), every GPU of data/devices.textproto as a target,
// origins with and without TF32/bf16 units, every math mode, forward and
// backward, origin times from 1 us to seconds. A prediction is never below
// the target's floor, and the clamp to the floor happens exactly when the
// model's own value would have been below it.
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/devices/device_database.h"
#include "core/devices/device_rates.h"
#include "core/kernel_varying/features.h"
#include "core/kernel_varying/op_signature.h"
#include "core/predict/varying_predictor.h"
#include "core/scaling/wave_scaling.h"
#include "core/testing/op_builder.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using kernel_varying::Family;
using kernel_varying::kB;
using kernel_varying::kBias;
using kernel_varying::kCausal;
using kernel_varying::kCIn;
using kernel_varying::kCOut;
using kernel_varying::kHeadDim;
using kernel_varying::kHeads;
using kernel_varying::kK;
using kernel_varying::kKernel;
using kernel_varying::kLayers;
using kernel_varying::kM;
using kernel_varying::kN;
using kernel_varying::kPadding;
using kernel_varying::kSeq;
using kernel_varying::kSize;
using kernel_varying::kStride;
using testing::OpBuilder;
using v1::Operation;

struct Shape {
  Family family;
  kernel_varying::OpConfig config{};
  bool bidirectional = false;  // LSTM only
};

Shape Make(Family family,
           std::initializer_list<std::pair<kernel_varying::ConfigColumn, int64_t>> values,
           bool bidirectional = false) {
  return Shape{family, testing::OpConfigOf(values), bidirectional};
}

std::vector<Shape> Sweep() {
  return {
      // Linear: a single element, odd sizes, a 1-row GEMM (decode), square,
      // a 128k-vocabulary head.
      Make(Family::kLinear, {{kM, 1}, {kN, 1}, {kK, 1}}),
      Make(Family::kLinear, {{kM, 7}, {kN, 13}, {kK, 17}, {kBias, 1}}),
      Make(Family::kLinear, {{kM, 1}, {kN, 4096}, {kK, 4096}}),
      Make(Family::kLinear, {{kM, 4096}, {kN, 4096}, {kK, 4096}, {kBias, 1}}),
      Make(Family::kLinear, {{kM, 8192}, {kN, 128256}, {kK, 4096}}),
      // Batched matrix multiplies.
      Make(Family::kBmm, {{kB, 1}, {kM, 1}, {kN, 1}, {kK, 1}}),
      Make(Family::kBmm, {{kB, 3}, {kM, 1}, {kN, 4097}, {kK, 1}}),
      Make(Family::kBmm, {{kB, 32}, {kM, 50}, {kN, 50}, {kK, 64}}),
      Make(Family::kBmm, {{kB, 96}, {kM, 2048}, {kN, 2048}, {kK, 128}}),
      // Convolutions: 7x7 stride 2, 3x3, 1x1, 5x5 on an odd size, tiny, huge.
      Make(Family::kConv2d, {{kB, 16},
                             {kCIn, 3},
                             {kCOut, 64},
                             {kKernel, 7},
                             {kStride, 2},
                             {kPadding, 3},
                             {kSize, 224}}),
      Make(Family::kConv2d, {{kB, 32},
                             {kCIn, 64},
                             {kCOut, 64},
                             {kKernel, 3},
                             {kStride, 1},
                             {kPadding, 1},
                             {kSize, 56}}),
      Make(Family::kConv2d, {{kB, 16},
                             {kCIn, 1024},
                             {kCOut, 256},
                             {kKernel, 1},
                             {kStride, 1},
                             {kSize, 14},
                             {kBias, 1}}),
      Make(Family::kConv2d, {{kB, 8},
                             {kCIn, 32},
                             {kCOut, 32},
                             {kKernel, 5},
                             {kStride, 1},
                             {kPadding, 2},
                             {kSize, 31}}),
      Make(Family::kConv2d,
           {{kB, 1}, {kCIn, 1}, {kCOut, 1}, {kKernel, 3}, {kStride, 1}, {kSize, 3}}),
      Make(Family::kConv2d, {{kB, 256},
                             {kCIn, 512},
                             {kCOut, 512},
                             {kKernel, 3},
                             {kStride, 1},
                             {kPadding, 1},
                             {kSize, 64}}),
      // Transposed convolutions (DCGAN's generator and larger).
      Make(Family::kConvTranspose2d,
           {{kB, 64}, {kCIn, 100}, {kCOut, 512}, {kKernel, 4}, {kStride, 1}, {kSize, 1}}),
      Make(Family::kConvTranspose2d, {{kB, 64},
                                      {kCIn, 512},
                                      {kCOut, 256},
                                      {kKernel, 4},
                                      {kStride, 2},
                                      {kPadding, 1},
                                      {kSize, 4}}),
      Make(Family::kConvTranspose2d,
           {{kB, 1}, {kCIn, 3}, {kCOut, 3}, {kKernel, 3}, {kStride, 1}, {kSize, 5}}),
      Make(Family::kConvTranspose2d, {{kB, 128},
                                      {kCIn, 256},
                                      {kCOut, 128},
                                      {kKernel, 4},
                                      {kStride, 2},
                                      {kPadding, 1},
                                      {kSize, 64}}),
      // LSTMs: GNMT's, a single cell, a bidirectional 2-layer one, odd sizes.
      Make(Family::kLstm, {{kB, 32}, {kSeq, 50}, {kK, 1024}, {kN, 1024}, {kLayers, 1}, {kBias, 1}}),
      Make(Family::kLstm, {{kB, 1}, {kSeq, 1}, {kK, 1}, {kN, 1}, {kLayers, 1}, {kBias, 1}}),
      Make(Family::kLstm, {{kB, 64}, {kSeq, 512}, {kK, 512}, {kN, 512}, {kLayers, 2}, {kBias, 1}},
           true),
      Make(Family::kLstm, {{kB, 7}, {kSeq, 3}, {kK, 33}, {kN, 65}, {kLayers, 3}, {kBias, 1}}),
      // Attention: tiny, the Transformer's, odd and causal, long sequences.
      Make(Family::kSdpa, {{kB, 1}, {kHeads, 1}, {kSeq, 1}, {kHeadDim, 64}}),
      Make(Family::kSdpa, {{kB, 32}, {kHeads, 8}, {kSeq, 50}, {kHeadDim, 64}}),
      Make(Family::kSdpa, {{kB, 2}, {kHeads, 3}, {kSeq, 77}, {kHeadDim, 32}, {kCausal, 1}}),
      Make(Family::kSdpa, {{kB, 4}, {kHeads, 16}, {kSeq, 4096}, {kHeadDim, 128}}),
      Make(Family::kSdpa, {{kB, 1}, {kHeads, 32}, {kSeq, 32768}, {kHeadDim, 128}, {kCausal, 1}}),
  };
}

// The recorded operation ExtractOpSignature reads back as `s`, with tensors
// of `dtype`.
Operation Record(const Shape& s, const std::string& dtype) {
  const kernel_varying::OpConfig& c = s.config;
  switch (s.family) {
    case Family::kLinear: {
      OpBuilder w("aten::linear", dtype);
      w.Tensor({c[kM], c[kK]}).Tensor({c[kN], c[kK]});
      if (c[kBias] != 0) {
        w.Tensor({c[kN]});
      } else {
        w.None();
      }
      return w.op();
    }
    case Family::kBmm:
      return OpBuilder("aten::bmm", dtype)
          .Tensor({c[kB], c[kM], c[kK]})
          .Tensor({c[kB], c[kK], c[kN]})
          .op();
    case Family::kConv2d: {
      OpBuilder w("aten::conv2d", dtype);
      w.Tensor({c[kB], c[kCIn], c[kSize], c[kSize]})
          .Tensor({c[kCOut], c[kCIn], c[kKernel], c[kKernel]});
      if (c[kBias] != 0) {
        w.Tensor({c[kCOut]});
      } else {
        w.None();
      }
      return w.Ints({c[kStride], c[kStride]})
          .Ints({c[kPadding], c[kPadding]})
          .Ints({1, 1})
          .Int(1)
          .op();
    }
    case Family::kConvTranspose2d:
      return OpBuilder("aten::conv_transpose2d", dtype)
          .Tensor({c[kB], c[kCIn], c[kSize], c[kSize]})
          .Tensor({c[kCIn], c[kCOut], c[kKernel], c[kKernel]})
          .None()
          .Ints({c[kStride], c[kStride]})
          .Ints({c[kPadding], c[kPadding]})
          .Ints({0, 0})
          .Int(1)
          .Ints({1, 1})
          .op();
    case Family::kLstm: {
      const int64_t directions = s.bidirectional ? 2 : 1;
      const int64_t h = c[kN];
      std::vector<std::vector<int64_t>> params;
      for (int64_t layer = 0; layer < c[kLayers]; ++layer) {
        for (int64_t d = 0; d < directions; ++d) {
          params.push_back({4 * h, layer == 0 ? c[kK] : h * directions});
          params.push_back({4 * h, h});
          params.push_back({4 * h});
          params.push_back({4 * h});
        }
      }
      return OpBuilder("aten::lstm", dtype)
          .Tensor({c[kSeq], c[kB], c[kK]})
          .List({{c[kLayers] * directions, c[kB], h}, {c[kLayers] * directions, c[kB], h}})
          .List(params)
          .Bool(true)
          .Int(c[kLayers])
          .Scalar(0)
          .Bool(true)
          .Bool(s.bidirectional)
          .Bool(false)
          .op();
    }
    case Family::kSdpa: {
      const std::vector<int64_t> qkv = {c[kB], c[kHeads], c[kSeq], c[kHeadDim]};
      return OpBuilder("aten::scaled_dot_product_attention", dtype)
          .Tensor(qkv)
          .Tensor(qkv)
          .Tensor(qkv)
          .None()
          .Scalar(0)
          .Bool(c[kCausal] != 0)
          .op();
    }
  }
  return Operation();
}

// A trace of every shape of the sweep, each pass taking `time_ns` on the
// origin, run in `mode` (tensor dtypes for fp16/bf16, the TF32 switches for
// fp32/tf32).
v1::Trace SweepTrace(const std::vector<Shape>& shapes, MathMode mode, Nanoseconds time_ns) {
  v1::Trace trace;
  const bool tf32 = mode == MathMode::kTf32;
  trace.mutable_math()->set_matmul_tf32(tf32);
  trace.mutable_math()->set_cudnn_tf32(tf32);
  trace.mutable_math()->set_source("recorded");
  const std::string dtype = mode == MathMode::kBf16   ? "c10::BFloat16"
                            : mode == MathMode::kFp16 ? "c10::Half"
                                                      : "float";
  for (const Shape& s : shapes) {
    Operation* op = trace.add_operations();
    *op = Record(s, dtype);
    op->mutable_forward()->set_time_ns(time_ns);
    op->mutable_backward()->set_time_ns(time_ns);
  }
  return trace;
}

class VaryingPropertyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto devices = DeviceDatabase::LoadFromFile(HABITAT_DATA_DIR "/devices.textproto");
    ASSERT_TRUE(devices.ok()) << devices.status();
    devices_ = new DeviceDatabase(*std::move(devices));
    auto model = kernel_varying::KernelVaryingModel::Load(HABITAT_KERNEL_VARYING_DIR);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::shared_ptr<const kernel_varying::KernelVaryingModel>(std::move(*model));
  }
  static void TearDownTestSuite() {
    delete devices_;
    model_.reset();
  }

  static DeviceDatabase* devices_;
  static std::shared_ptr<const kernel_varying::KernelVaryingModel> model_;
};

DeviceDatabase* VaryingPropertyTest::devices_ = nullptr;
std::shared_ptr<const kernel_varying::KernelVaryingModel> VaryingPropertyTest::model_;

TEST_F(VaryingPropertyTest,
       BetweenTheFloorAndTheLargeGemmCeilingExactlyWhenTheRatioAndModelWouldNotBe) {
  const std::vector<Shape> shapes = Sweep();
  // The recorded operations read back as the sweep's configurations.
  for (const Shape& s : shapes) {
    auto signature = kernel_varying::ExtractOpSignature(Record(s, "float"));
    ASSERT_TRUE(signature.ok() && signature->has_value()) << DescribeConfig(s.family, s.config);
    EXPECT_EQ((*signature)->config, s.config) << DescribeConfig(s.family, s.config);
    EXPECT_EQ((*signature)->direction_factor, s.bidirectional ? 2 : 1);
  }
  std::vector<const v1::DeviceSpec*> targets;
  for (const auto& d : devices_->devices()) targets.push_back(&d);
  // No memo: every pass goes through the model.
  const VaryingPredictor predictor(model_, 0);
  int checked = 0, clamped = 0, capped = 0, bounded = 0, uncovered = 0, split = 0;
  // An origin with every kind of unit, one with fp32 CUDA cores and fp16
  // tensor cores only, and one with all but measured TF32.
  for (const char* origin_id : {"H100-SXM", "T4", "A100-SXM-80GB"}) {
    const v1::DeviceSpec& origin = **devices_->Get(origin_id);
    for (MathMode mode : kernel_varying::kAllMathModes) {
      // The origin runs what its units allow (bf16 on a T4 runs fp32).
      const MathMode origin_mode = TargetMathMode(mode, origin);
      for (Nanoseconds time_ns : {Nanoseconds{1'000}, Nanoseconds{20'000}, Nanoseconds{300'000},
                                  Nanoseconds{30'000'000}, Nanoseconds{3'000'000'000}}) {
        const v1::Trace trace = SweepTrace(shapes, mode, time_ns);
        auto tables = predictor.PredictTrace(trace, origin, targets);
        ASSERT_TRUE(tables.ok()) << tables.status();
        ASSERT_EQ(tables->size(), targets.size());
        // Every pass the model covers, with the model's own value computed
        // here from the features, in the mode it runs in on the target and,
        // for TF32, in fp32 too (the bound).
        struct Candidate {
          size_t row;
          double ratio;
          double ceiling_ns;     // of the call; 9e18 where none applies
          double typical_ns;     // of the call, a large GEMM whose mode changed or in TF32; else 0
          double extra_call_ns;  // after a change of mode (ModeChangeExtraNs), of the call
          double split_ns;       // of the call, a GEMM split at its roofline; else 0
        };
        struct Pass {
          size_t target;
          size_t shape;
          bool backward;
          Nanoseconds floor_ns;
          Candidate primary;
          std::optional<Candidate> fp32;
        };
        std::vector<Pass> passes;
        std::vector<float> rows;
        size_t row_count = 0;
        for (size_t t = 0; t < targets.size(); ++t) {
          const v1::DeviceSpec& target = *targets[t];
          const VaryingPassTable& table = (*tables)[t];
          if (target.id() == origin.id() || SameComputeUnits(origin, target)) {
            EXPECT_TRUE(table.empty()) << origin_id << "->" << target.id();
            continue;
          }
          for (size_t i = 0; i < shapes.size(); ++i) {
            const Shape& s = shapes[i];
            const int directions = s.bidirectional ? 2 : 1;
            const MathMode target_mode = TargetMathMode(origin_mode, target);
            for (bool backward : {false, true}) {
              const std::string where = absl::StrCat(
                  DescribeConfig(s.family, s.config), " ", MathModeName(mode),
                  backward ? " bwd " : " fwd ", time_ns, " ns ", origin_id, "->", target.id());
              auto it = table.find(VaryingPassKey(static_cast<int>(i), backward));
              if (time_ns / directions < model_->min_origin_ns()) {
                EXPECT_EQ(it, table.end()) << where << ": shorter than min_origin_ns";
                ++uncovered;
                continue;
              }
              ASSERT_NE(it, table.end()) << where;
              const VaryingPassPrediction& p = it->second;
              EXPECT_EQ(p.origin_mode, origin_mode) << where;
              EXPECT_EQ(p.target_mode, target_mode) << where;
              auto floor =
                  kernel_varying::FloorNs(s.family, s.config, target_mode, backward, target);
              ASSERT_TRUE(floor.ok()) << where << ": " << floor.status();
              const Nanoseconds floor_ns = static_cast<Nanoseconds>(std::ceil(*floor * directions));
              EXPECT_GT(floor_ns, 0) << where;
              EXPECT_EQ(p.floor_ns, floor_ns) << where;
              EXPECT_GE(p.predicted_ns, floor_ns) << where;
              EXPECT_GT(p.predicted_ns, 0) << where;
              const double family_error = model_->ExpectedErrorPercent(s.family, target.id());
              EXPECT_DOUBLE_EQ(p.expected_error_percent,
                               target_mode == origin_mode
                                   ? family_error
                                   : std::hypot(family_error, model_->ModeChangeErrorPercent(
                                                                  s.family, origin_mode)))
                  << where;
              Pass pass{t, i, backward, floor_ns, {}, std::nullopt};
              for (MathMode evaluated : {target_mode, MathMode::kFp32}) {
                if (evaluated != target_mode && target_mode != MathMode::kTf32) break;
                Candidate c{row_count++, 0, 0, 0, 0, 0};
                // After a change of mode: moved as a pass in the target's
                // mode, from what it would take on the origin in that mode.
                double extra_ns = 0;
                if (evaluated != origin_mode) {
                  auto extra = kernel_varying::ModeChangeExtraNs(s.family, s.config, origin_mode,
                                                                 evaluated, backward, origin,
                                                                 model_->large_gemm_typical());
                  ASSERT_TRUE(extra.ok()) << where << ": " << extra.status();
                  extra_ns = *extra;
                }
                c.extra_call_ns = extra_ns * directions;
                ASSERT_TRUE(kernel_varying::AppendFeatures(
                                s.family, s.config, evaluated, evaluated, backward, origin, target,
                                static_cast<double>(time_ns / directions) + extra_ns, &rows,
                                &c.ratio)
                                .ok())
                    << where;
                ASSERT_TRUE(std::isfinite(c.ratio) && c.ratio > 0) << where;
                auto large = LargeGemmRooflineOnTarget(*model_, s.family, s.config, origin_mode,
                                                       evaluated, backward, target,
                                                       /*via_sibling=*/false);
                ASSERT_TRUE(large.ok()) << where << ": " << large.status();
                const double large_ns = *large;
                c.ceiling_ns =
                    large_ns > 0 ? large_ns * model_->large_gemm_ceiling() * directions : 9.0e18;
                // The ceiling never undercuts the floor.
                EXPECT_GE(c.ceiling_ns, static_cast<double>(floor_ns) - 1) << where;
                c.typical_ns =
                    large_ns > 0 && (evaluated != origin_mode || evaluated == MathMode::kTf32)
                        ? large_ns * model_->large_gemm_typical() * directions
                        : 0;
                // A GEMM or convolution below the large-GEMM test, in
                // fp16/bf16 as on the origin, on a target without data in
                // that mode: its roofline share by the roofline ratio, the
                // rest as latency.
                if (large_ns == 0 && evaluated == origin_mode &&
                    (evaluated == MathMode::kFp16 || evaluated == MathMode::kBf16) &&
                    !model_->TrainedOn(s.family, evaluated, target.id())) {
                  auto r_o = kernel_varying::SustainedRooflineNs(s.family, s.config, evaluated,
                                                                 backward, origin);
                  auto r_t = kernel_varying::SustainedRooflineNs(s.family, s.config, evaluated,
                                                                 backward, target);
                  ASSERT_TRUE(r_o.ok() && r_t.ok()) << where;
                  const double latency = origin.sm_count() * SustainedClockMhz(origin) /
                                         (target.sm_count() * SustainedClockMhz(target));
                  const double t_ns = static_cast<double>(time_ns), bound = *r_o * directions;
                  c.split_ns =
                      std::min(t_ns, bound) * (*r_t / *r_o) + std::max(t_ns - bound, 0.0) * latency;
                }
                if (evaluated == target_mode) {
                  pass.primary = c;
                } else {
                  pass.fp32 = c;
                }
              }
              passes.push_back(pass);
            }
          }
        }
        auto corrections = model_->PredictLog2Corrections(rows, row_count);
        ASSERT_TRUE(corrections.ok()) << corrections.status();
        // A large GEMM (it has a ceiling) takes no correction, and after a
        // change of math mode or in TF32 is the typical multiple of its
        // roofline; a split GEMM takes no correction either.
        const auto value_of = [&](const Candidate& c) {
          const bool large_gemm = c.ceiling_ns < 9.0e18;
          if (c.split_ns > 0) return c.split_ns;
          return c.typical_ns > 0 ? c.typical_ns
                                  : (static_cast<double>(time_ns) + c.extra_call_ns) * c.ratio *
                                        (large_gemm ? 1.0 : std::exp2((*corrections)[c.row]));
        };
        for (const Pass& pass : passes) {
          const Shape& s = shapes[pass.shape];
          const double primary =
              std::min({value_of(pass.primary), 9.0e18, pass.primary.ceiling_ns});
          const bool bound = pass.fp32.has_value() && std::min({value_of(*pass.fp32), 9.0e18,
                                                                pass.fp32->ceiling_ns}) < primary;
          const Candidate& c = bound ? *pass.fp32 : pass.primary;
          const double value = value_of(c);
          ASSERT_TRUE(std::isfinite(value)) << DescribeConfig(s.family, s.config);
          const Nanoseconds raw = std::llround(std::min({value, 9.0e18, c.ceiling_ns}));
          const VaryingPassPrediction& p = (*tables)[pass.target].at(
              VaryingPassKey(static_cast<int>(pass.shape), pass.backward));
          const std::string where = absl::StrCat(
              DescribeConfig(s.family, s.config), " ", MathModeName(mode),
              pass.backward ? " bwd " : " fwd ", time_ns, " ns ", origin_id, "->",
              targets[pass.target]->id(), ": model ", raw, " ns, floor ", pass.floor_ns, " ns");
          EXPECT_EQ(p.fp32_bound, bound) << where;
          EXPECT_EQ(p.large_gemm, c.ceiling_ns < 9.0e18) << where;
          EXPECT_EQ(p.capped_at_ceiling, std::min(value, 9.0e18) > c.ceiling_ns) << where;
          EXPECT_EQ(p.clamped_to_floor, raw < pass.floor_ns) << where;
          EXPECT_EQ(p.predicted_ns, std::max(raw, pass.floor_ns)) << where;
          ++checked;
          clamped += p.clamped_to_floor;
          capped += p.capped_at_ceiling;
          bounded += p.fp32_bound;
          split += c.split_ns > 0;
        }
      }
    }
  }
  std::cout << checked << " passes checked, " << clamped << " clamped to the floor, " << capped
            << " capped at the large-GEMM ceiling, " << bounded << " bounded by fp32, " << uncovered
            << " shorter than min_origin_ns, " << split << " split at their roofline\n";
  EXPECT_GT(checked, 10000);
  // Impossibly short origin times for huge ops must hit the floor.
  EXPECT_GT(clamped, 0);
  EXPECT_LT(clamped, checked);
  // Impossibly long origin times for large fp32 GEMMs must hit the ceiling.
  EXPECT_GT(capped, 0);
  EXPECT_LT(capped, checked);
  // Some TF32 passes the model would put slower than fp32 (the sweep's
  // origin times run from impossibly fast to impossibly slow).
  EXPECT_GT(bounded, 0);
  // fp16/bf16 GEMMs on GPUs without data in those modes.
  EXPECT_GT(split, 0);
  EXPECT_LT(split, checked);
}

}  // namespace
}  // namespace habitat
