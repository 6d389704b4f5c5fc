// Parity with the training side: for every row of parity_reference.json
// (written by models/export.py with Python's features() and the trained
// trees), the C++ features, roofline ratio, floor and model output must give
// the same numbers. Also the model's loading errors, its manifest accessors
// and its use from many threads.

#include "core/kernel_varying/kernel_varying_model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/file_io.h"
#include "common/sha256.h"
#include "core/devices/device_database.h"
#include "core/kernel_varying/features.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace kernel_varying {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

const std::string kModelDir = HABITAT_KERNEL_VARYING_DIR;

json ReadJson(const std::string& path) {
  auto text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? json::parse(*text, nullptr, false) : json();
}

struct Row {
  std::string label;
  Family family;
  OpConfig config{};
  MathMode origin_mode, target_mode;
  bool backward;
  std::string origin, target;
  double origin_ns;
  std::vector<double> features;
  double roofline_ratio, floor_ns, log2_correction, large_gemm_roofline_ns, mode_change_extra_ns;
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
    auto origin_mode = ParseMathMode(e.at("origin_mode").get<std::string>());
    auto target_mode = ParseMathMode(e.at("target_mode").get<std::string>());
    EXPECT_TRUE(family.ok() && origin_mode.ok() && target_mode.ok()) << e.dump();
    if (!family.ok() || !origin_mode.ok() || !target_mode.ok()) continue;
    r.family = *family;
    r.origin_mode = *origin_mode;
    r.target_mode = *target_mode;
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
    r.roofline_ratio = e.at("roofline_ratio").get<double>();
    r.floor_ns = e.at("floor_ns").get<double>();
    r.large_gemm_roofline_ns = e.at("large_gemm_roofline_ns").get<double>();
    r.mode_change_extra_ns = e.at("mode_change_extra_ns").get<double>();
    r.log2_correction = e.at("log2_correction").get<double>();
    r.label = absl::StrCat("row ", i, " ", DescribeConfig(r.family, r.config), " ",
                           MathModeName(r.origin_mode), "->", MathModeName(r.target_mode),
                           r.backward ? " bwd " : " fwd ", r.origin, "->", r.target);
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

struct Computed {
  std::vector<float> flat;  // features of all rows
  std::vector<double> ratios;
};

// The C++ features of all parity rows.
Computed ComputeAll(const std::vector<Row>& rows) {
  Computed out;
  for (const Row& r : rows) {
    auto origin = Devices().Get(r.origin);
    auto target = Devices().Get(r.target);
    EXPECT_TRUE(origin.ok() && target.ok()) << r.label;
    if (!origin.ok() || !target.ok()) return {};
    double ratio = 0;
    auto s = AppendFeatures(r.family, r.config, r.origin_mode, r.target_mode, r.backward, **origin,
                            **target, r.origin_ns, &out.flat, &ratio);
    EXPECT_TRUE(s.ok()) << r.label << ": " << s;
    if (!s.ok()) return {};
    out.ratios.push_back(ratio);
  }
  return out;
}

// Relative `rel`, absolute `rel` within 1 of 0.
bool Close(double ours, double theirs, double rel) {
  return std::fabs(ours - theirs) <= rel * std::max(1.0, std::fabs(theirs));
}

TEST(ParityTest, FeaturesRooflineRatiosAndFloorsMatchTheTrainingSide) {
  const std::vector<Row> rows = ParityRows();
  ASSERT_GE(rows.size(), 50u);
  // Every family and both passes are in the reference.
  std::set<std::string> kinds;
  std::map<std::string, int> modes;
  for (const Row& r : rows) {
    kinds.insert(std::string(FamilyName(r.family)));
    kinds.insert(r.backward ? "backward" : "forward");
    ++modes[absl::StrCat(MathModeName(r.origin_mode), "->", MathModeName(r.target_mode))];
  }
  EXPECT_EQ(kinds.size(), kFamilyCount + 2);
  const Computed computed = ComputeAll(rows);
  ASSERT_EQ(computed.flat.size(), rows.size() * kFeatureCount);
  size_t exact = 0, large_gemms = 0, mode_changes = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    ASSERT_EQ(r.features.size(), kFeatureCount) << r.label;
    for (size_t j = 0; j < kFeatureCount; ++j) {
      const double ours = computed.flat[i * kFeatureCount + j], theirs = r.features[j];
      EXPECT_TRUE(Close(ours, theirs, 1e-5)) << r.label << " feature " << FeatureNames()[j]
                                             << ": C++ " << ours << ", Python " << theirs;
      exact += ours == static_cast<float>(theirs);
    }
    EXPECT_TRUE(Close(computed.ratios[i], r.roofline_ratio, 1e-9))
        << r.label << " roofline ratio: C++ " << computed.ratios[i] << ", Python "
        << r.roofline_ratio;
    auto ratio = RooflineRatio(r.family, r.config, r.origin_mode, r.target_mode, r.backward,
                               **Devices().Get(r.origin), **Devices().Get(r.target));
    ASSERT_TRUE(ratio.ok()) << r.label << ": " << ratio.status();
    EXPECT_TRUE(Close(*ratio, r.roofline_ratio, 1e-9))
        << r.label << " RooflineRatio: C++ " << *ratio << ", Python " << r.roofline_ratio;
    auto floor = FloorNs(r.family, r.config, r.target_mode, r.backward, **Devices().Get(r.target));
    ASSERT_TRUE(floor.ok()) << r.label << ": " << floor.status();
    EXPECT_TRUE(Close(*floor, r.floor_ns, 1e-9))
        << r.label << " floor: C++ " << *floor << " ns, Python " << r.floor_ns;
    auto large = LargeGemmRooflineNs(r.family, r.config, r.target_mode, r.backward,
                                     **Devices().Get(r.target));
    ASSERT_TRUE(large.ok()) << r.label << ": " << large.status();
    EXPECT_TRUE(Close(*large, r.large_gemm_roofline_ns, 1e-9))
        << r.label << " large-GEMM roofline: C++ " << *large << " ns, Python "
        << r.large_gemm_roofline_ns;
    large_gemms += *large > 0;
    auto extra = ModeChangeExtraNs(r.family, r.config, r.origin_mode, r.target_mode, r.backward,
                                   **Devices().Get(r.origin), Model().large_gemm_typical());
    ASSERT_TRUE(extra.ok()) << r.label << ": " << extra.status();
    EXPECT_TRUE(Close(*extra, r.mode_change_extra_ns, 1e-9))
        << r.label << " mode-change extra: C++ " << *extra << " ns, Python "
        << r.mode_change_extra_ns;
    mode_changes += *extra > 0;
  }
  // And passes whose mode changes, with extra arithmetic on the origin.
  EXPECT_GT(mode_changes, 0u);
  // The reference holds passes the ceiling applies to and passes it does not.
  EXPECT_GT(large_gemms, 0u);
  EXPECT_LT(large_gemms, rows.size());
  std::cout << "features equal to Python's after rounding to float: " << exact << " of "
            << computed.flat.size() << "; mode pairs:";
  for (const auto& [pair, count] : modes) std::cout << " " << pair << " " << count;
  std::cout << "\n";
}

TEST(ParityTest, ModelOutputsMatchTheTrainingSide) {
  const std::vector<Row> rows = ParityRows();
  ASSERT_FALSE(rows.empty());
  const Computed computed = ComputeAll(rows);
  ASSERT_EQ(computed.flat.size(), rows.size() * kFeatureCount);
  auto corrections = Model().PredictLog2Corrections(computed.flat, rows.size());
  ASSERT_TRUE(corrections.ok()) << corrections.status();
  ASSERT_EQ(corrections->size(), rows.size());
  double worst = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const double difference = std::fabs((*corrections)[i] - rows[i].log2_correction);
    worst = std::max(worst, difference);
    EXPECT_LE(difference, 1e-4) << rows[i].label << ": C++ " << (*corrections)[i] << ", Python "
                                << rows[i].log2_correction;
  }
  std::cout << "largest difference of the log2 correction: " << worst << "\n";
  // One row at a time gives the batch's answers.
  for (size_t i = 0; i < rows.size(); i += 7) {
    std::vector<float> one(computed.flat.begin() + i * kFeatureCount,
                           computed.flat.begin() + (i + 1) * kFeatureCount);
    auto single = Model().PredictLog2Corrections(one, 1);
    ASSERT_TRUE(single.ok()) << single.status();
    EXPECT_EQ((*single)[0], (*corrections)[i]) << rows[i].label;
  }
}

TEST(KernelVaryingModelTest, ManyThreadsGetTheSameAnswers) {
  const std::vector<Row> rows = ParityRows();
  const std::vector<float> flat = ComputeAll(rows).flat;
  ASSERT_FALSE(flat.empty());
  auto expected = Model().PredictLog2Corrections(flat, rows.size());
  ASSERT_TRUE(expected.ok());
  std::vector<int> mismatches(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int iteration = 0; iteration < 25; ++iteration) {
        // Different batch sizes per thread: prefixes of the reference rows.
        const size_t n = 1 + (t * 13 + iteration * 5) % rows.size();
        std::vector<float> prefix(flat.begin(), flat.begin() + n * kFeatureCount);
        auto got = Model().PredictLog2Corrections(prefix, n);
        if (!got.ok() || got->size() != n) {
          ++mismatches[t];
          continue;
        }
        for (size_t i = 0; i < n; ++i) mismatches[t] += (*got)[i] != (*expected)[i];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(KernelVaryingModelTest, ManifestAccessors) {
  const json manifest = ReadJson(kModelDir + "/manifest.json");
  EXPECT_EQ(Model().min_origin_ns(), manifest.at("min_origin_ns").get<int64_t>());
  EXPECT_EQ(Model().model_sha256(), manifest.at("model_sha256").get<std::string>());
  EXPECT_EQ(Model().large_gemm_ceiling(), manifest.at("large_gemm_ceiling").get<double>());
  EXPECT_GE(Model().large_gemm_ceiling(), 1.0);
  EXPECT_EQ(Model().large_gemm_typical(), manifest.at("large_gemm_typical").get<double>());
  EXPECT_GE(Model().large_gemm_typical(), 1.0);
  EXPECT_LE(Model().large_gemm_typical(), Model().large_gemm_ceiling());
  // TrainedOn is the coverage, exactly.
  const json& coverage = manifest.at("coverage");
  int trained = 0;
  for (Family family : kAllFamilies) {
    for (MathMode mode : kAllMathModes) {
      for (const auto& gpu : Devices().devices()) {
        const json* ids = nullptr;
        auto f = coverage.find(std::string(FamilyName(family)));
        if (f != coverage.end()) {
          auto m = f->find(std::string(MathModeName(mode)));
          if (m != f->end()) ids = &*m;
        }
        bool listed = false;
        for (const json& id : ids != nullptr ? *ids : json::array()) listed |= id == gpu.id();
        EXPECT_EQ(Model().TrainedOn(family, mode, gpu.id()), listed)
            << FamilyName(family) << " " << MathModeName(mode) << " " << gpu.id();
        trained += listed;
      }
    }
  }
  EXPECT_GT(trained, 0);
  // The expected error per target and family, else the default.
  const json& expected = manifest.at("expected_error");
  const double fallback = expected.at("default_percent").get<double>();
  EXPECT_EQ(Model().ExpectedErrorPercent(Family::kLinear, "no such GPU"), fallback);
  const json by_target = expected.value("by_target", json::object());
  for (const auto& [gpu, by_family] : by_target.items()) {
    for (Family family : kAllFamilies) {
      EXPECT_EQ(Model().ExpectedErrorPercent(family, gpu),
                by_family.value(std::string(FamilyName(family)), fallback))
          << gpu << " " << FamilyName(family);
    }
  }
  // The mode-change error per origin mode and family, else its default.
  const json& mode_change = expected.at("mode_change");
  const double mode_fallback = mode_change.at("default_percent").get<double>();
  const json by_mode = mode_change.at("by_origin_mode");
  EXPECT_TRUE(by_mode.contains("bf16") && by_mode.contains("tf32")) << by_mode.dump();
  for (MathMode mode : kAllMathModes) {
    const json by_family = by_mode.value(std::string(MathModeName(mode)), json::object());
    for (Family family : kAllFamilies) {
      EXPECT_EQ(Model().ModeChangeErrorPercent(family, mode),
                by_family.value(std::string(FamilyName(family)), mode_fallback))
          << MathModeName(mode) << " " << FamilyName(family);
    }
  }
}

TEST(KernelVaryingModelTest, BadInputIsAnError) {
  auto wrong_size = Model().PredictLog2Corrections(std::vector<float>(kFeatureCount + 1, 0.0f), 1);
  EXPECT_EQ(wrong_size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_size.status().message(), HasSubstr("36 values, expected 1 rows of 35"));
  std::vector<float> nan_row(2 * kFeatureCount, 1.0f);
  nan_row[kFeatureCount + 3] = std::nanf("");
  auto nan = Model().PredictLog2Corrections(nan_row, 2);
  EXPECT_THAT(nan.status().message(), HasSubstr("row 1 feature family_conv_transpose2d"));
  auto empty = Model().PredictLog2Corrections({}, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// The file's bytes as stored (ReadFile would inflate a .gz).
std::string RawBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A copy of the model directory the test may damage.
class DamagedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("kernel_varying_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    manifest_ = ReadJson(kModelDir + "/manifest.json");
    model_file_ = manifest_.value("model_file", "model.json.gz");
    for (const std::string& name : {std::string("manifest.json"), model_file_}) {
      fs::copy_file(fs::path(kModelDir) / name, dir_ / name);
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary | std::ios::trunc) << bytes;
  }
  void WriteManifest() { Write("manifest.json", manifest_.dump(1)); }
  // Replaces the model file and makes the manifest's hash match it.
  void WriteModel(const std::string& bytes) {
    Write(model_file_, bytes);
    manifest_["model_sha256"] = Sha256Hex(bytes);
    WriteManifest();
  }
  std::string ModelText() { return *Gunzip(RawBytes((dir_ / model_file_).string())); }
  absl::Status Load() { return KernelVaryingModel::Load(dir_.string()).status(); }

  fs::path dir_;
  json manifest_;
  std::string model_file_;
};

TEST_F(DamagedModelTest, IntactCopyLoads) { EXPECT_TRUE(Load().ok()) << Load(); }

TEST_F(DamagedModelTest, MissingFilesAreNamed) {
  fs::remove(dir_ / model_file_);
  EXPECT_EQ(Load().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Load().message(), HasSubstr(model_file_ + ": cannot open"));
  fs::remove(dir_ / "manifest.json");
  EXPECT_THAT(Load().message(), HasSubstr("manifest.json: cannot open"));
  EXPECT_EQ(KernelVaryingModel::Load((dir_ / "nowhere").string()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(DamagedModelTest, CorruptManifest) {
  Write("manifest.json", "{\"feature_version\": 2,");
  EXPECT_EQ(Load().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Load().message(), HasSubstr("manifest.json: not a JSON object"));
}

TEST_F(DamagedModelTest, OtherFeatureVersion) {
  manifest_["feature_version"] = 1;
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("feature_version is 1, this build computes version 2"));
}

TEST_F(DamagedModelTest, OtherFeatureNamesFamiliesOrModes) {
  std::swap(manifest_["feature_names"][0], manifest_["feature_names"][1]);
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("feature_names [family_bmm, family_linear"));
  std::swap(manifest_["feature_names"][0], manifest_["feature_names"][1]);
  manifest_["families"].push_back("conv3d");
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("families [linear, bmm, conv2d, conv_transpose2d, "
                                          "lstm, sdpa, conv3d] differ"));
  manifest_["families"].erase(6);
  manifest_["modes"] = {"fp32", "bf16"};
  WriteManifest();
  EXPECT_THAT(Load().message(),
              HasSubstr("modes [fp32, bf16] differ from core/kernel_varying's [fp32, "
                        "tf32, fp16, bf16]"));
}

TEST_F(DamagedModelTest, CoverageMissingOrMalformed) {
  manifest_["coverage"]["linear"]["fp8"] = {"H100-SXM"};
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("coverage.linear: unknown math mode \"fp8\""));
  manifest_["coverage"]["linear"].erase("fp8");
  manifest_["coverage"]["conv3d"] = json::object();
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("coverage: unknown operator family \"conv3d\""));
  manifest_["coverage"].erase("conv3d");
  manifest_["coverage"]["linear"]["fp32"] = {7};
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("coverage.linear.fp32 holds a non-string"));
  manifest_.erase("coverage");
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("no \"coverage\" object"));
}

TEST_F(DamagedModelTest, ExpectedErrorMissingOrMalformed) {
  manifest_["expected_error"]["by_target"]["T4"] = {{"conv3d", 5}};
  WriteManifest();
  EXPECT_THAT(Load().message(),
              HasSubstr("expected_error.by_target.T4.conv3d: unknown operator family"));
  manifest_["expected_error"]["by_target"]["T4"] = {{"linear", -1}};
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("expected_error.by_target.T4.linear must be a "
                                          "non-negative number, got -1"));
  manifest_["expected_error"]["by_target"]["T4"] = {{"linear", 20}};
  json& mode_change = manifest_["expected_error"]["mode_change"];
  mode_change["by_origin_mode"]["fp8"] = json::object();
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("expected_error.mode_change.by_origin_mode.fp8: "));
  mode_change["by_origin_mode"].erase("fp8");
  mode_change["by_origin_mode"]["bf16"]["linear"] = "22";
  WriteManifest();
  EXPECT_THAT(Load().message(),
              HasSubstr("expected_error.mode_change.by_origin_mode.bf16.linear must be a "
                        "non-negative number"));
  mode_change.erase("default_percent");
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("expected_error.mode_change has no \"default_percent\""));
  manifest_["expected_error"].erase("mode_change");
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("expected_error has no \"mode_change\" object"));
  manifest_["expected_error"].erase("by_target");
  manifest_["expected_error"].erase("default_percent");
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("expected_error has no \"default_percent\""));
  manifest_["expected_error"] = nullptr;
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("no \"expected_error\" object"));
}

TEST_F(DamagedModelTest, LargeGemmCeilingMissingOrBelowOne) {
  for (const json& bad : {json(0.9), json("1.5"), json(nullptr)}) {
    manifest_["large_gemm_ceiling"] = bad;
    WriteManifest();
    EXPECT_THAT(Load().message(), HasSubstr("\"large_gemm_ceiling\" must be a finite number >= 1"))
        << bad.dump();
  }
  manifest_.erase("large_gemm_ceiling");
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("large_gemm_ceiling"));
}

TEST_F(DamagedModelTest, LargeGemmTypicalMissingOrOutsideOneToTheCeiling) {
  const double ceiling = manifest_.at("large_gemm_ceiling").get<double>();
  for (const json& bad : {json(0.9), json(ceiling + 0.01), json("1.2"), json(nullptr)}) {
    manifest_["large_gemm_typical"] = bad;
    WriteManifest();
    EXPECT_THAT(Load().message(),
                HasSubstr("\"large_gemm_typical\" must be a number in [1, large_gemm_ceiling]"))
        << bad.dump();
  }
  manifest_.erase("large_gemm_typical");
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("large_gemm_typical"));
}

TEST_F(DamagedModelTest, ModelFileOutsideTheDirectory) {
  manifest_["model_file"] = "../model.json.gz";
  WriteManifest();
  EXPECT_THAT(Load().message(), HasSubstr("\"model_file\" must name a file next to the manifest"));
}

TEST_F(DamagedModelTest, ModelFromAnotherRun) {
  Write(model_file_, *Gzip(ModelText() + " "));
  EXPECT_THAT(Load().message(), HasSubstr(model_file_ + ": sha256"));
  EXPECT_THAT(Load().message(), HasSubstr("differs from model_sha256"));
}

TEST_F(DamagedModelTest, TruncatedModelWithMatchingHash) {
  // Passes the hash check (the manifest is rewritten to match) and fails to
  // inflate: a clear error naming the file.
  WriteModel(RawBytes((dir_ / model_file_).string()).substr(0, 1024));
  const absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(model_file_ + ": not a gzip file"));
}

TEST_F(DamagedModelTest, NotAnXgboostModel) {
  WriteModel(*Gzip(R"({"arch": "structured", "layers": []})"));
  EXPECT_THAT(Load().message(),
              HasSubstr(model_file_ + ": not an XGBoost model (JSON or UBJSON): "));
  WriteModel(*Gzip("weights"));
  EXPECT_THAT(Load().message(), HasSubstr(model_file_ + ": not an XGBoost model"));
}

TEST_F(DamagedModelTest, ModelOfOtherFeatures) {
  const std::string text = ModelText();
  const std::string count = absl::StrCat("\"num_feature\":\"", kFeatureCount, "\"");
  ASSERT_NE(text.find(count), std::string::npos);
  WriteModel(*Gzip(absl::StrReplaceAll(text, {{count, "\"num_feature\":\"47\""}})));
  EXPECT_THAT(
      Load().message(),
      HasSubstr(model_file_ + ": the model takes 47 features, core/kernel_varying/features.h "
                              "computes 35"));
}

TEST_F(DamagedModelTest, UncompressedModelLoadsToo) {
  // XGBoost reads JSON from a buffer: gzip is only how the file is stored.
  WriteModel(ModelText());
  EXPECT_TRUE(Load().ok()) << Load();
}

}  // namespace
}  // namespace kernel_varying
}  // namespace habitat
