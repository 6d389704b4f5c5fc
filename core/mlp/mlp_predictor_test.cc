// Parity with the training side: for every row of
// models/kernel_varying/parity_reference.json (written by models/export.py
// with Python's features() and the exported model), the C++ features and the
// C++ forward pass must give the same numbers. Also the model's loading
// errors and its use from many threads.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/sha256.h"
#include "core/devices/device_database.h"
#include "core/mlp/features.h"
#include "core/mlp/kernel_varying_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace mlp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

const std::string kModelDir = HABITAT_MODELS_DIR "/kernel_varying";

json ReadJson(const std::string& path) {
  auto text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? json::parse(*text, nullptr, false) : json();
}

struct Row {
  std::string label;
  Family family;
  OpConfig config{};
  Precision precision;
  bool backward;
  std::string origin, target;
  double origin_ns;
  std::vector<double> features;
  double predicted_ratio;
};

std::vector<Row> ParityRows() {
  const json doc = ReadJson(kModelDir + "/parity_reference.json");
  EXPECT_TRUE(doc.is_array()) << "parity_reference.json is not a JSON array";
  std::vector<Row> rows;
  if (!doc.is_array()) return rows;
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& e = doc[i];
    Row r;
    auto family = ParseFamily(e.at("family").get<std::string>());
    auto precision = ParsePrecision(e.at("precision").get<std::string>());
    EXPECT_TRUE(family.ok() && precision.ok()) << e.dump();
    if (!family.ok() || !precision.ok()) continue;
    r.family = *family;
    r.precision = *precision;
    for (const auto& [key, value] : e.at("config").items()) {
      auto column = ParseConfigColumn(key);
      EXPECT_TRUE(column.ok()) << column.status();
      if (column.ok()) r.config[*column] = value.get<int64_t>();
    }
    r.backward = e.at("backward").get<bool>();
    r.origin = e.at("origin").get<std::string>();
    r.target = e.at("target").get<std::string>();
    r.origin_ns = e.at("origin_ns").get<double>();
    r.features = e.at("features").get<std::vector<double>>();
    r.predicted_ratio = e.at("predicted_ratio").get<double>();
    r.label = absl::StrCat("row ", i, " ", DescribeConfig(r.family, r.config), " ",
                           PrecisionName(r.precision), r.backward ? " bwd " : " fwd ", r.origin,
                           "->", r.target);
    rows.push_back(std::move(r));
  }
  return rows;
}

const DeviceDatabase& Devices() {
  static const DeviceDatabase* db = [] {
    auto loaded = DeviceDatabase::LoadFromFile(HABITAT_DATA_DIR "/devices.textproto");
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return new DeviceDatabase(*std::move(loaded));
  }();
  return *db;
}

const KernelVaryingModel& Model() {
  static const KernelVaryingModel* model = [] {
    auto loaded = KernelVaryingModel::Load(kModelDir);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? loaded->release() : nullptr;
  }();
  return *model;
}

// The C++ features of all parity rows, flat.
std::vector<float> ComputeAll(const std::vector<Row>& rows) {
  std::vector<float> flat;
  for (const Row& r : rows) {
    auto origin = Devices().Get(r.origin);
    auto target = Devices().Get(r.target);
    EXPECT_TRUE(origin.ok() && target.ok()) << r.label;
    if (!origin.ok() || !target.ok()) return {};
    auto s = AppendFeatures(r.family, r.config, r.precision, r.backward, **origin, **target,
                            r.origin_ns, &flat);
    EXPECT_TRUE(s.ok()) << r.label << ": " << s;
    if (!s.ok()) return {};
  }
  return flat;
}

TEST(ParityTest, FeaturesMatchTheTrainingSide) {
  const std::vector<Row> rows = ParityRows();
  ASSERT_GE(rows.size(), 50u);
  // Every family and both precisions and passes are in the reference.
  std::set<std::string> kinds;
  for (const Row& r : rows) {
    kinds.insert(std::string(FamilyName(r.family)));
    kinds.insert(std::string(PrecisionName(r.precision)));
    kinds.insert(r.backward ? "backward" : "forward");
  }
  EXPECT_EQ(kinds.size(), kFamilyCount + 4);
  const std::vector<float> flat = ComputeAll(rows);
  ASSERT_EQ(flat.size(), rows.size() * kFeatureCount);
  size_t exact = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].features.size(), kFeatureCount) << rows[i].label;
    for (size_t j = 0; j < kFeatureCount; ++j) {
      const double ours = flat[i * kFeatureCount + j], theirs = rows[i].features[j];
      EXPECT_LE(std::fabs(ours - theirs), 1e-5 * std::fabs(theirs))
          << rows[i].label << " feature " << FeatureNames()[j] << ": C++ " << ours << ", Python "
          << theirs;
      exact += ours == theirs;
    }
  }
  RecordProperty("features_bit_identical", absl::StrCat(exact, "/", flat.size()));
  std::cout << "features bit-identical to Python's: " << exact << " of " << flat.size() << "\n";
}

TEST(ParityTest, PredictionsMatchTheTrainingSide) {
  const std::vector<Row> rows = ParityRows();
  ASSERT_FALSE(rows.empty());
  const std::vector<float> flat = ComputeAll(rows);
  ASSERT_EQ(flat.size(), rows.size() * kFeatureCount);
  auto log2_ratios = Model().PredictLog2Ratios(flat, rows.size());
  ASSERT_TRUE(log2_ratios.ok()) << log2_ratios.status();
  ASSERT_EQ(log2_ratios->size(), rows.size());
  double worst = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const double ratio = std::exp2((*log2_ratios)[i]);
    const double rel = std::fabs(ratio - rows[i].predicted_ratio) / rows[i].predicted_ratio;
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 1e-4) << rows[i].label << ": C++ " << ratio << ", Python "
                         << rows[i].predicted_ratio;
  }
  std::cout << "largest relative difference of the predicted ratio: " << worst << "\n";
  // One row at a time gives the batch's answers.
  for (size_t i = 0; i < rows.size(); i += 7) {
    std::vector<float> one(flat.begin() + i * kFeatureCount,
                           flat.begin() + (i + 1) * kFeatureCount);
    auto single = Model().PredictLog2Ratios(one, 1);
    ASSERT_TRUE(single.ok()) << single.status();
    EXPECT_NEAR((*single)[0], (*log2_ratios)[i], 1e-5) << rows[i].label;
  }
}

TEST(KernelVaryingModelTest, ManyThreadsGetTheSameAnswers) {
  const std::vector<Row> rows = ParityRows();
  const std::vector<float> flat = ComputeAll(rows);
  ASSERT_FALSE(flat.empty());
  auto expected = Model().PredictLog2Ratios(flat, rows.size());
  ASSERT_TRUE(expected.ok());
  std::vector<int> mismatches(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int iteration = 0; iteration < 25; ++iteration) {
        // Different batch sizes per thread: prefixes of the reference rows.
        const size_t n = 1 + (t * 13 + iteration * 5) % rows.size();
        std::vector<float> prefix(flat.begin(), flat.begin() + n * kFeatureCount);
        auto got = Model().PredictLog2Ratios(prefix, n);
        if (!got.ok() || got->size() != n) {
          ++mismatches[t];
          continue;
        }
        for (size_t i = 0; i < n; ++i) {
          mismatches[t] += std::fabs((*got)[i] - (*expected)[i]) > 1e-5;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(KernelVaryingModelTest, ManifestAccessors) {
  const json manifest = ReadJson(kModelDir + "/manifest.json");
  EXPECT_EQ(Model().trained_gpus(), manifest.at("trained_gpus").get<std::vector<std::string>>());
  EXPECT_EQ(Model().min_origin_ns(), manifest.at("min_origin_ns").get<int64_t>());
  EXPECT_EQ(Model().model_sha256(), manifest.at("model_sha256").get<std::string>());
  for (Family f : kAllFamilies) {
    std::vector<std::string> names;
    for (Precision p : Model().trained_precisions(f)) names.emplace_back(PrecisionName(p));
    EXPECT_EQ(names, manifest.at("trained_precisions")
                         .value(std::string(FamilyName(f)), std::vector<std::string>()))
        << FamilyName(f);
  }
}

TEST(KernelVaryingModelTest, BadInputIsAnError) {
  auto wrong_size = Model().PredictLog2Ratios(std::vector<float>(kFeatureCount + 1, 0.0f), 1);
  EXPECT_EQ(wrong_size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_size.status().message(), HasSubstr("48 values, expected 1 rows of 47"));
  std::vector<float> nan_row(2 * kFeatureCount, 1.0f);
  nan_row[kFeatureCount + 3] = std::nanf("");
  auto nan = Model().PredictLog2Ratios(nan_row, 2);
  EXPECT_THAT(nan.status().message(), HasSubstr("row 1 feature family_conv_transpose2d"));
  auto empty = Model().PredictLog2Ratios({}, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// The file's bytes as stored (ReadFile would inflate a .gz).
std::string RawBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string Sha256Of(const std::string& path) { return Sha256Hex(RawBytes(path)); }

// A copy of the model directory the test may damage.
class DamagedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("kernel_varying_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* name : {"manifest.json", "model.json.gz"}) {
      fs::copy_file(fs::path(kModelDir) / name, dir_ / name);
    }
    manifest_ = ReadJson((dir_ / "manifest.json").string());
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const char* name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary | std::ios::trunc) << bytes;
  }
  void WriteManifest() { Write("manifest.json", manifest_.dump(1)); }
  absl::Status Load() { return KernelVaryingModel::Load(dir_.string()).status(); }

  fs::path dir_;
  json manifest_;
};

TEST_F(DamagedModelTest, IntactCopyLoads) { EXPECT_TRUE(Load().ok()) << Load(); }

TEST_F(DamagedModelTest, MissingFilesAreNamed) {
  fs::remove(dir_ / "model.json.gz");
  EXPECT_EQ(Load().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Load().message(), HasSubstr("model.json.gz: cannot open"));
  fs::remove(dir_ / "manifest.json");
  EXPECT_THAT(Load().message(), HasSubstr("manifest.json: cannot open"));
  EXPECT_EQ(KernelVaryingModel::Load((dir_ / "nowhere").string()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(DamagedModelTest, CorruptManifest) {
  Write("manifest.json", "{\"feature_version\": 1,");
  EXPECT_EQ(Load().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Load().message(), HasSubstr("manifest.json: not a JSON object"));
}

TEST_F(DamagedModelTest, OtherFeatureVersion) {
  manifest_["feature_version"] = kFeatureVersion + 1;
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("feature_version is 2, this build computes version 1"));
}

TEST_F(DamagedModelTest, OtherFeatureNames) {
  std::swap(manifest_["feature_names"][0], manifest_["feature_names"][1]);
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("feature_names [family_bmm, family_linear"));
  manifest_["feature_names"].erase(0);
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("feature_names"));
}

TEST_F(DamagedModelTest, UnknownFamilyOrPrecision) {
  manifest_["trained_precisions"]["conv3d"] = {"fp32"};
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("unknown operator family \"conv3d\""));
  manifest_["trained_precisions"].erase("conv3d");
  manifest_["trained_precisions"]["linear"] = {"fp8"};
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("trained_precisions.linear: unknown precision"));
}

TEST_F(DamagedModelTest, CoverageMissingOrMalformed) {
  manifest_["coverage"]["linear"]["fp8"] = {"H100-SXM"};
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("coverage.linear: unknown precision"));
  manifest_["coverage"]["linear"].erase("fp8");
  manifest_["coverage"]["linear"]["fp32"] = {7};
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("coverage.linear.fp32 holds a non-string"));
  manifest_.erase("coverage");
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("no \"coverage\" object"));
}

TEST(KernelVaryingModelCoverage, TrainedOnFollowsTheManifest) {
  // models/kernel_varying/manifest.json: fp32 conv2d on the T4 (NeuSight),
  // bf16 conv2d only on the H100 and H200.
  EXPECT_TRUE(Model().TrainedOn(Family::kConv2d, Precision::kFp32, "T4"));
  EXPECT_TRUE(Model().TrainedOn(Family::kConv2d, Precision::kBf16, "H200"));
  EXPECT_FALSE(Model().TrainedOn(Family::kConv2d, Precision::kBf16, "T4"));
  EXPECT_FALSE(Model().TrainedOn(Family::kLinear, Precision::kFp32, "L4"));
}

TEST_F(DamagedModelTest, ModelFromAnotherRun) {
  std::string text = *ReadFile((dir_ / "model.json.gz").string());
  text.replace(text.find("\"mean\":[") + 8, 1, "9");
  Write("model.json.gz", *Gzip(text));
  EXPECT_THAT(Load().message(), HasSubstr("model.json.gz: sha256"));
  EXPECT_THAT(Load().message(), HasSubstr("differs from model_sha256"));
}

TEST_F(DamagedModelTest, TruncatedModelWithMatchingHash) {
  // Passes the hash check (the manifest is rewritten to match) and fails to
  // inflate: a clear error naming the file.
  Write("model.json.gz", RawBytes((dir_ / "model.json.gz").string()).substr(0, 4096));
  manifest_["model_sha256"] = Sha256Of((dir_ / "model.json.gz").string());
  WriteManifest();
  const absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("model.json.gz: not a gzip file"));
}

TEST_F(DamagedModelTest, NetworkOfAnotherShape) {
  // A well-formed network whose last layer has 3 outputs where the
  // structured model needs one per spec difference (8).
  const std::string text =
      R"({"arch":"structured","context":[0,1],"delta_origin":[27,28,29,30,31,32,39,44],)"
      R"("delta_target":[33,34,35,36,37,38,40,45],"mean":[0,0],"std":[1,1],)"
      R"("layers":[{"weight":[[1,0],[0,1],[1,1]],"bias":[0,0,0]}]})";
  Write("model.json.gz", *Gzip(text));
  manifest_["model_sha256"] = Sha256Of((dir_ / "model.json.gz").string());
  WriteManifest();
  EXPECT_THAT(Load().message(),
              HasSubstr("model.json.gz: does not map [N, 47] features to [N]: the last layer "
                        "has 3 outputs"));
}

}  // namespace
}  // namespace mlp
}  // namespace habitat
