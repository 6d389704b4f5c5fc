// Signatures from the real torch.profiler captures in tests/testdata/kineto
// (ResNet-50, Inception v3, Transformer, GNMT, DCGAN on an H100 and an
// H200), checked by hand against the models' definitions, and the rules for
// variants outside training and for damaged arguments.
#include "core/kernel_varying/op_signature.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "core/kineto/kineto_import.h"
#include "core/testing/kineto_fixtures.h"
#include "core/testing/op_builder.h"
#include "core/trace/math_mode.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace kernel_varying {
namespace {

namespace fs = std::filesystem;
using habitat::v1::Argument;
using habitat::v1::Operation;
using habitat::v1::Trace;
using ::testing::HasSubstr;
using testing::OpBuilder;
using testing::OpConfigOf;
using testing::PrecisionOf;

// Imports tests/testdata/kineto/<gpu>/<name>.json.gz once per process.
const Trace& Fixture(const std::string& gpu, const std::string& name) {
  static auto* cache = new std::map<std::string, Trace>();
  const std::string key = gpu + "/" + name;
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  Trace& trace = (*cache)[key];
  auto text = ReadFile(absl::StrCat(HABITAT_TESTDATA_DIR, "/kineto/", key, ".json.gz"));
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return trace;
  KinetoImportOptions options;
  options.model_name = name;
  options.precision = PrecisionOf(name);
  auto imported = ImportKinetoTrace(*text, options);
  EXPECT_TRUE(imported.ok()) << imported.status();
  if (imported.ok()) trace = *std::move(imported);
  return trace;
}

struct Found {
  const Operation* op;
  OpSignature signature;
};

// Signatures of the trace's operations, in order; every extraction must
// succeed (the fixtures are undamaged).
std::vector<Found> Signatures(const Trace& trace) {
  std::vector<Found> out;
  for (const Operation& op : trace.operations()) {
    auto s = ExtractOpSignature(op);
    EXPECT_TRUE(s.ok()) << op.name() << ": " << s.status();
    if (s.ok() && s->has_value()) out.push_back({&op, **s});
  }
  return out;
}

std::vector<Found> OfFamily(const std::vector<Found>& all, Family family) {
  std::vector<Found> out;
  for (const Found& f : all) {
    if (f.signature.family == family) out.push_back(f);
  }
  return out;
}

std::string Describe(const OpSignature& s) { return DescribeConfig(s.family, s.config); }

TEST(OpSignatureFixtureTest, EveryFixtureExtractsWithoutError) {
  std::vector<std::string> cases;
  for (const char* gpu : {"h100", "h200"}) {
    const fs::path dir = fs::path(HABITAT_TESTDATA_DIR) / "kineto" / gpu;
    for (const auto& file : fs::directory_iterator(dir)) {
      std::string name = file.path().filename().string();
      if (!absl::EndsWith(name, ".json.gz")) continue;
      name.resize(name.size() - 8);
      const auto found = Signatures(Fixture(gpu, name));
      EXPECT_FALSE(found.empty()) << gpu << "/" << name;
      cases.push_back(name);
    }
  }
  EXPECT_GE(cases.size(), 40u);
}

// The first operation of `family` in the trace, with its signature.
Found First(const std::string& gpu, const std::string& name, Family family) {
  const auto all = OfFamily(Signatures(Fixture(gpu, name)), family);
  EXPECT_FALSE(all.empty()) << gpu << "/" << name << " has no " << FamilyName(family);
  return all.empty() ? Found{nullptr, OpSignature()} : all.front();
}

TEST(OpSignatureFixtureTest, ResNet50FirstConvAndClassifier) {
  const auto all = Signatures(Fixture("h100", "resnet50_b16_fp32"));
  const auto convs = OfFamily(all, Family::kConv2d);
  // 53 convolutions, all square, groups 1, dilation 1.
  EXPECT_EQ(convs.size(), 53u);
  ASSERT_FALSE(convs.empty());
  EXPECT_EQ(convs[0].op->name(), "aten::conv2d");
  EXPECT_EQ(convs[0].signature.config, OpConfigOf({{kB, 16},
                                                   {kCIn, 3},
                                                   {kCOut, 64},
                                                   {kKernel, 7},
                                                   {kStride, 2},
                                                   {kPadding, 3},
                                                   {kSize, 224}}))
      << Describe(convs[0].signature);
  EXPECT_EQ(convs[0].signature.direction_factor, 1);
  const auto linear = OfFamily(all, Family::kLinear);
  ASSERT_EQ(linear.size(), 1u);
  EXPECT_EQ(linear[0].op->name(), "aten::linear");
  EXPECT_EQ(linear[0].signature.config, OpConfigOf({{kM, 16}, {kN, 1000}, {kK, 2048}, {kBias, 1}}));
}

TEST(OpSignatureFixtureTest, AutocastConvWithFloatInputIsBf16) {
  // Under autocast the first conv records its fp32 input and weight: the
  // signature does not say the mode, InferOpMathMode does.
  const Found first = First("h100", "resnet50_b64_bf16", Family::kConv2d);
  ASSERT_NE(first.op, nullptr);
  bool any_half = false;
  for (const auto& a : first.op->arguments()) {
    any_half = any_half || (a.has_tensor() && a.tensor().dtype() != "float");
  }
  EXPECT_FALSE(any_half) << "the fixture's first conv no longer records float inputs";
  EXPECT_EQ(InferOpMathMode(Fixture("h100", "resnet50_b64_bf16"), *first.op,
                            IsCudnnFamily(first.signature.family))
                .mode,
            MathMode::kBf16);
  EXPECT_EQ(first.signature.config[kB], 64);
}

TEST(OpSignatureFixtureTest, InceptionAsymmetricKernelsAreNotCovered) {
  const Trace& trace = Fixture("h100", "inception_v3_b16_fp32");
  int covered = 0, uncovered = 0;
  for (const Operation& op : trace.operations()) {
    if (op.name() != "aten::conv2d") continue;
    auto s = ExtractOpSignature(op);
    ASSERT_TRUE(s.ok()) << s.status();
    (s->has_value() ? covered : uncovered)++;
    if (!s->has_value()) {
      // The 1x7 / 7x1 / 1x3 / 3x1 factorised kernels.
      const auto& w = op.arguments(1).tensor();
      EXPECT_NE(w.shape(2), w.shape(3)) << op.name();
    }
  }
  // Inception v3 (torchvision, with the auxiliary classifier): 94 + 2 convs,
  // of which 34 have asymmetric kernels.
  EXPECT_EQ(covered + uncovered, 96);
  EXPECT_EQ(uncovered, 34);
}

TEST(OpSignatureFixtureTest, GnmtLstmsAndAttention) {
  const auto all = Signatures(Fixture("h100", "gnmt_b32_fp32"));
  const auto lstms = OfFamily(all, Family::kLstm);
  ASSERT_EQ(lstms.size(), 8u);
  // The encoder's first layer: bidirectional, batch_first, [32, 50, 1024].
  int bidirectional = 0;
  for (const Found& f : lstms) {
    EXPECT_EQ(f.signature.config[kB], 32);
    EXPECT_EQ(f.signature.config[kSeq], 50);
    EXPECT_EQ(f.signature.config[kN], 1024);
    EXPECT_EQ(f.signature.config[kLayers], 1);
    EXPECT_EQ(f.signature.config[kBias], 1);
    if (f.signature.direction_factor == 2) {
      ++bidirectional;
      EXPECT_EQ(f.signature.config[kK], 1024);
    }
  }
  EXPECT_EQ(bidirectional, 1);
  // Decoder layers take [attention context, hidden]: input size 2048.
  EXPECT_GE(std::count_if(lstms.begin(), lstms.end(),
                          [](const Found& f) { return f.signature.config[kK] == 2048; }),
            3);
  const auto bmm = OfFamily(all, Family::kBmm);
  ASSERT_EQ(bmm.size(), 2u);
  EXPECT_EQ(bmm[0].signature.config, OpConfigOf({{kB, 32}, {kM, 50}, {kN, 50}, {kK, 1024}}));
  EXPECT_EQ(bmm[1].signature.config, OpConfigOf({{kB, 32}, {kM, 50}, {kN, 1024}, {kK, 50}}));
}

TEST(OpSignatureFixtureTest, TransformerAttentionCausalFlag) {
  const Trace& trace = Fixture("h100", "transformer_b32_bf16");
  const auto all = Signatures(trace);
  const auto sdpa = OfFamily(all, Family::kSdpa);
  ASSERT_EQ(sdpa.size(), 18u);  // 6 encoder, 6 decoder self, 6 cross
  int causal = 0;
  for (const Found& f : sdpa) {
    EXPECT_EQ(InferOpMathMode(trace, *f.op, /*cudnn_family=*/false).mode, MathMode::kBf16);
    OpConfig expected = OpConfigOf({{kB, 32}, {kHeads, 8}, {kSeq, 50}, {kHeadDim, 64}});
    expected[kCausal] = f.signature.config[kCausal];
    EXPECT_EQ(f.signature.config, expected);
    causal += static_cast<int>(f.signature.config[kCausal]);
    // Argument "5" is is_causal in the recorded schema.
    const Argument& flag = f.op->arguments(5);
    ASSERT_EQ(flag.name(), "5");
    ASSERT_TRUE(flag.has_boolean());
    EXPECT_EQ(flag.boolean(), f.signature.config[kCausal] == 1);
  }
  EXPECT_EQ(causal, 6);  // the decoder's self-attention
  const auto linear = OfFamily(all, Family::kLinear);
  EXPECT_EQ(linear.size(), 67u);
  for (const Found& f : linear) EXPECT_EQ(f.signature.config[kM], 1600) << Describe(f.signature);
}

TEST(OpSignatureFixtureTest, DcganTransposedConvs) {
  const auto all = Signatures(Fixture("h200", "dcgan_b64_fp32"));
  const auto deconv = OfFamily(all, Family::kConvTranspose2d);
  ASSERT_EQ(deconv.size(), 5u);
  EXPECT_EQ(
      deconv[0].signature.config,
      OpConfigOf({{kB, 64}, {kCIn, 100}, {kCOut, 512}, {kKernel, 4}, {kStride, 1}, {kSize, 1}}));
  EXPECT_EQ(deconv[1].signature.config, OpConfigOf({{kB, 64},
                                                    {kCIn, 512},
                                                    {kCOut, 256},
                                                    {kKernel, 4},
                                                    {kStride, 2},
                                                    {kPadding, 1},
                                                    {kSize, 4}}));
  EXPECT_EQ(OfFamily(all, Family::kConv2d).size(), 15u);  // 5 per D pass, 3 passes
}

// Hand-made operations, for the rules the fixtures do not exercise.
OpBuilder Conv2d(std::vector<int64_t> input, std::vector<int64_t> weight,
                 std::vector<int64_t> stride, std::vector<int64_t> padding,
                 std::vector<int64_t> dilation, double groups) {
  OpBuilder b("aten::conv2d");
  b.Tensor(input).Tensor(weight).None().Ints(stride).Ints(padding).Ints(dilation).Scalar(groups);
  return b;
}

OpSignature Covered(const Operation& op) {
  const absl::StatusOr<std::optional<OpSignature>> s = ExtractOpSignature(op);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s.ok() && s->has_value());
  return s.ok() && s->has_value() ? **s : OpSignature();
}

void ExpectUncovered(const Operation& op) {
  const absl::StatusOr<std::optional<OpSignature>> s = ExtractOpSignature(op);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->has_value()) << Describe(**s);
}

void ExpectError(const Operation& op, const std::string& fragment) {
  const absl::StatusOr<std::optional<OpSignature>> s = ExtractOpSignature(op);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr(fragment));
}

TEST(OpSignatureRulesTest, ConvVariantsOutsideTraining) {
  ExpectUncovered(Conv2d({8, 32, 28, 28}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2).op());
  ExpectUncovered(Conv2d({8, 32, 28, 28}, {32, 32, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1).op());
  ExpectUncovered(Conv2d({8, 32, 28, 28}, {32, 32, 1, 7}, {1, 1}, {0, 3}, {1, 1}, 1).op());
  ExpectUncovered(Conv2d({8, 32, 28, 28}, {32, 32, 3, 3}, {1, 2}, {1, 1}, {1, 1}, 1).op());
  ExpectUncovered(Conv2d({8, 32, 28, 14}, {32, 32, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1).op());
  // The same conv in fp64 runs other kernels.
  ASSERT_TRUE(
      Covered(Conv2d({8, 32, 28, 28}, {32, 32, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1).op()).config[kB] ==
      8);
  ExpectUncovered(OpBuilder("aten::conv2d")
                      .Tensor({8, 32, 28, 28}, "double")
                      .Tensor({32, 32, 3, 3}, "double")
                      .op());
  // One value for both dimensions, as F.conv2d(stride=2) records it; an
  // unbatched [C, H, W] input is a batch of one.
  const OpSignature s = Covered(Conv2d({32, 28, 28}, {64, 32, 3, 3}, {2}, {1}, {1}, 1).op());
  EXPECT_EQ(s.config, OpConfigOf({{kB, 1},
                                  {kCIn, 32},
                                  {kCOut, 64},
                                  {kKernel, 3},
                                  {kStride, 2},
                                  {kPadding, 1},
                                  {kSize, 28}}));
}

TEST(OpSignatureRulesTest, ConvStringPaddingAndConvolutionOp) {
  OpBuilder same("aten::conv2d");
  same.Tensor({2, 8, 16, 16}).Tensor({8, 8, 5, 5}).None().Ints({1, 1}).Text("same");
  EXPECT_EQ(Covered(same.op()).config[kPadding], 2);
  OpBuilder valid("aten::conv2d");
  valid.Tensor({2, 8, 16, 16}).Tensor({8, 8, 5, 5}).None().Ints({2, 2}).Text("valid");
  EXPECT_EQ(Covered(valid.op()).config[kPadding], 0);
  OpBuilder strided_same("aten::conv2d");
  strided_same.Tensor({2, 8, 16, 16}).Tensor({8, 8, 5, 5}).None().Ints({2, 2}).Text("same");
  ExpectError(strided_same.op(), "padding \"same\" needs stride 1");

  // aten::convolution(input, weight, bias, stride, padding, dilation,
  // transposed, output_padding, groups), as the fixtures record it.
  OpBuilder conv("aten::convolution");
  conv.Tensor({16, 3, 224, 224})
      .Tensor({64, 3, 7, 7})
      .Tensor({64})
      .Ints({2, 2})
      .Ints({3, 3})
      .Ints({1, 1})
      .Bool(false)
      .Ints({0, 0})
      .Scalar(1);
  EXPECT_EQ(Covered(conv.op()).config, OpConfigOf({{kB, 16},
                                                   {kCIn, 3},
                                                   {kCOut, 64},
                                                   {kKernel, 7},
                                                   {kStride, 2},
                                                   {kPadding, 3},
                                                   {kSize, 224},
                                                   {kBias, 1}}));
  OpBuilder transposed("aten::convolution");
  transposed.Tensor({4, 64, 8, 8})
      .Tensor({64, 32, 4, 4})
      .None()
      .Ints({2, 2})
      .Ints({1, 1})
      .Ints({1, 1})
      .Bool(true)
      .Ints({0, 0})
      .Scalar(1);
  const OpSignature t = Covered(transposed.op());
  EXPECT_EQ(t.family, Family::kConvTranspose2d);
  EXPECT_EQ(t.config[kCOut], 32);
  OpBuilder conv1d("aten::convolution");
  conv1d.Tensor({4, 64, 100})
      .Tensor({64, 64, 3})
      .None()
      .Ints({1})
      .Ints({1})
      .Ints({1})
      .Bool(false)
      .Ints({0})
      .Scalar(1);
  ExpectUncovered(conv1d.op());
  OpBuilder output_padding("aten::conv_transpose2d");
  output_padding.Tensor({4, 64, 8, 8})
      .Tensor({64, 32, 3, 3})
      .None()
      .Ints({2, 2})
      .Ints({1, 1})
      .Ints({1, 1})
      .Scalar(1)
      .Ints({1, 1});
  ExpectUncovered(output_padding.op());
}

TEST(OpSignatureRulesTest, DamagedConvArgumentsAreErrors) {
  ExpectError(Conv2d({8, 32, 28, 28}, {64, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1).op(),
              "does not fit input [8, 32, 28, 28]");
  ExpectError(Conv2d({8, 32, 28, 28}, {64, 32, 3}, {1, 1}, {1, 1}, {1, 1}, 1).op(), "is not 4-D");
  ExpectError(Conv2d({8, 32, 28, 28}, {64, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4e15).op(),
              "with groups 4000000000000000 does not fit");
  ExpectError(Conv2d({8, 32, 28, 28}, {64, 32, 3, 3}, {0, 0}, {1, 1}, {1, 1}, 1).op(),
              "stride must be at least 1");
  ExpectError(Conv2d({8, 32, 28, 28}, {64, 32, 3, 3}, {1, 1, 1}, {1, 1}, {1, 1}, 1).op(),
              "has 3 values");
  ExpectError(Conv2d({8, 32, 28, 28}, {64, 32, 3, 3}, {1, 1}, {-1, -1}, {1, 1}, 1).op(),
              "negative padding");
  ExpectError(OpBuilder("aten::conv2d")
                  .Tensor({8, 32, 28, 28})
                  .Tensor({64, 32, 3, 3})
                  .None()
                  .Ints({1, 1})
                  .Text("full")
                  .op(),
              "argument \"4\": is not an integer");
  ExpectError(OpBuilder("aten::conv2d").Tensor({8, 32, 28, 28}).op(), "argument \"1\": missing");
  ExpectError(OpBuilder("aten::conv2d").Tensor({8, 32, 28, 28}).Scalar(3).op(),
              "argument \"1\": is not a tensor");
  ExpectError(OpBuilder("aten::conv2d").Tensor({8, -32, 28, 28}).Tensor({1, 1, 1, 1}).op(),
              "negative size");
}

TEST(OpSignatureRulesTest, MatrixProducts) {
  OpBuilder linear("aten::linear");
  linear.Tensor({50, 32, 512}).Tensor({1536, 512}).None();
  EXPECT_EQ(Covered(linear.op()).config, OpConfigOf({{kM, 1600}, {kN, 1536}, {kK, 512}}));
  OpBuilder vector_input("aten::linear");
  vector_input.Tensor({512}).Tensor({10, 512}).Tensor({10});
  EXPECT_EQ(Covered(vector_input.op()).config,
            OpConfigOf({{kM, 1}, {kN, 10}, {kK, 512}, {kBias, 1}}));
  ExpectError(OpBuilder("aten::linear").Tensor({16, 512}).Tensor({10, 256}).op(),
              "does not fit input [16, 512]");
  ExpectError(OpBuilder("aten::linear")
                  .Tensor({int64_t{1} << 40, int64_t{1} << 40, 512})
                  .Tensor({10, 512})
                  .op(),
              "implausibly large");

  OpBuilder addmm("aten::addmm");
  addmm.Tensor({1000}).Tensor({16, 2048}).Tensor({2048, 1000}).Scalar(1).Scalar(1);
  EXPECT_EQ(Covered(addmm.op()).config, OpConfigOf({{kM, 16}, {kN, 1000}, {kK, 2048}, {kBias, 1}}));
  ExpectError(OpBuilder("aten::mm").Tensor({16, 2048}).Tensor({1000, 2048}).op(),
              "do not multiply");

  // matmul: N-D x 2-D folds into one mm; equal batches are one bmm.
  OpBuilder folded("aten::matmul");
  folded.Tensor({32, 50, 1024}, "c10::BFloat16").Tensor({1024, 32000}, "c10::BFloat16");
  const OpSignature f = Covered(folded.op());
  EXPECT_EQ(f.family, Family::kLinear);
  EXPECT_EQ(f.config, OpConfigOf({{kM, 1600}, {kN, 32000}, {kK, 1024}}));
  OpBuilder batched("aten::matmul");
  batched.Tensor({4, 8, 128, 64}).Tensor({4, 8, 64, 128});
  const OpSignature b = Covered(batched.op());
  EXPECT_EQ(b.family, Family::kBmm);
  EXPECT_EQ(b.config, OpConfigOf({{kB, 32}, {kM, 128}, {kN, 128}, {kK, 64}}));
  ExpectUncovered(OpBuilder("aten::matmul").Tensor({4, 128, 64}).Tensor({64}).op());
  ExpectUncovered(OpBuilder("aten::matmul").Tensor({4, 128, 64}).Tensor({1, 64, 32}).op());
  ExpectUncovered(OpBuilder("aten::matmul").Tensor({128, 64}).Tensor({4, 64, 32}).op());

  OpBuilder baddbmm("aten::baddbmm");
  baddbmm.Tensor({32, 50, 50}).Tensor({32, 50, 64}).Tensor({32, 64, 50}).Scalar(0).Scalar(1);
  EXPECT_EQ(Covered(baddbmm.op()).config,
            OpConfigOf({{kB, 32}, {kM, 50}, {kN, 50}, {kK, 64}, {kBias, 1}}));
  ExpectError(OpBuilder("aten::bmm").Tensor({32, 50, 64}).Tensor({16, 64, 50}).op(),
              "do not batch-multiply");
  // Integer and fp64 products run other kernels.
  ExpectUncovered(OpBuilder("aten::mm").Tensor({64, 64}, "double").Tensor({64, 64}, "double").op());
  ExpectUncovered(
      OpBuilder("aten::mm").Tensor({64, 64}, "long int").Tensor({64, 64}, "long int").op());
  ExpectUncovered(OpBuilder("aten::mm").Tensor({0, 64}).Tensor({64, 64}).op());
}

TEST(OpSignatureRulesTest, Lstm) {
  // nn.LSTM(256, 512, num_layers=2), seq-first [T=20, B=8, 256], fp16 input.
  OpBuilder lstm("aten::lstm");
  lstm.Tensor({20, 8, 256}, "c10::Half")
      .List({{2, 8, 512}, {2, 8, 512}})
      .List({{2048, 256}, {2048, 512}, {2048}, {2048}, {2048, 512}, {2048, 512}, {2048}, {2048}})
      .Bool(true)
      .Scalar(2)
      .Scalar(0)
      .Bool(true)
      .Bool(false)
      .Bool(false);
  const OpSignature s = Covered(lstm.op());
  EXPECT_EQ(s.config,
            OpConfigOf({{kB, 8}, {kSeq, 20}, {kK, 256}, {kN, 512}, {kLayers, 2}, {kBias, 1}}));
  EXPECT_EQ(s.direction_factor, 1);
  // proj_size > 0: a fifth weight per layer.
  OpBuilder proj("aten::lstm");
  proj.Tensor({20, 8, 256})
      .List({{1, 8, 128}, {1, 8, 512}})
      .List({{2048, 256}, {2048, 128}, {2048}, {2048}, {128, 512}})
      .Bool(true)
      .Scalar(1)
      .Scalar(0)
      .Bool(true)
      .Bool(false)
      .Bool(false);
  ExpectUncovered(proj.op());
  // Packed sequences: argument 1 is the batch-size tensor.
  OpBuilder packed("aten::lstm");
  packed.Tensor({100, 256}).Tensor({20}, "long int").List({{1, 8, 512}, {1, 8, 512}});
  ExpectUncovered(packed.op());
  OpBuilder wrong("aten::lstm");
  wrong.Tensor({20, 8, 256})
      .List({{1, 8, 512}, {1, 8, 512}})
      .List({{2048, 128}, {2048, 512}, {2048}, {2048}})
      .Bool(true)
      .Scalar(1)
      .Scalar(0)
      .Bool(true)
      .Bool(false)
      .Bool(false);
  ExpectError(wrong.op(), "does not fit input [20, 8, 256]");
  OpBuilder missing("aten::lstm");
  missing.Tensor({20, 8, 256})
      .List({{1, 8, 512}, {1, 8, 512}})
      .List({{2048, 256}, {2048, 512}})
      .Bool(true)
      .Scalar(2)
      .Scalar(0)
      .Bool(true)
      .Bool(false)
      .Bool(false);
  ExpectError(missing.op(), "2 parameter tensors, expected 8");
}

TEST(OpSignatureRulesTest, Attention) {
  auto sdpa = [](std::vector<int64_t> q, std::vector<int64_t> kv, bool mask) {
    OpBuilder b("aten::scaled_dot_product_attention");
    b.Tensor(q).Tensor(kv).Tensor(kv);
    if (mask) {
      b.Tensor({q[2], kv[2]}, "bool");
    } else {
      b.None();
    }
    b.Scalar(0).Bool(true).None().Bool(false);
    return b;
  };
  const OpSignature s = Covered(sdpa({2, 16, 1024, 128}, {2, 16, 1024, 128}, false).op());
  EXPECT_EQ(s.config,
            OpConfigOf({{kB, 2}, {kHeads, 16}, {kSeq, 1024}, {kHeadDim, 128}, {kCausal, 1}}));
  ExpectUncovered(sdpa({2, 16, 1024, 128}, {2, 16, 77, 128}, false).op());
  ExpectUncovered(sdpa({2, 16, 1024, 128}, {2, 4, 1024, 128}, false).op());
  ExpectUncovered(sdpa({2, 16, 64, 128}, {2, 16, 64, 128}, true).op());
  ExpectError(sdpa({2, 16, 64, 128}, {16, 64, 128}, false).op(), "do not fit together");
}

TEST(OpSignatureRulesTest, OtherOpsAndShapelessTraces) {
  ExpectUncovered(OpBuilder("aten::relu_").Tensor({16, 64, 56, 56}).op());
  ExpectUncovered(OpBuilder("aten::conv2d").op());  // record_shapes off
}

}  // namespace
}  // namespace kernel_varying
}  // namespace habitat
