#include "core/testing/kineto_fixtures.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "common/file_io.h"
#include "core/kineto/kineto_import.h"
#include "gtest/gtest.h"

#ifndef HABITAT_TESTDATA_DIR
#error "HABITAT_TESTDATA_DIR must be defined"
#endif

namespace habitat {
namespace testing {

using nlohmann::json;

std::vector<Fixture> ListFixtures() {
  std::vector<Fixture> out;
  const std::filesystem::path root = std::filesystem::path(HABITAT_TESTDATA_DIR) / "kineto";
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return out;
  for (const auto& gpu : std::filesystem::directory_iterator(root)) {
    if (!gpu.is_directory()) continue;
    for (const auto& file : std::filesystem::directory_iterator(gpu.path())) {
      const std::string name = file.path().filename().string();
      if (!absl::EndsWith(name, ".json.gz")) continue;
      out.push_back(
          {gpu.path().filename().string(), name.substr(0, name.size() - 8), file.path().string()});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Fixture& a, const Fixture& b) { return a.path < b.path; });
  return out;
}

json Measurement(const Fixture& f) {
  auto text = ReadFile(std::string(HABITAT_TESTDATA_DIR) + "/measurements/" + f.gpu + ".json");
  if (!text.ok()) return json();
  const json doc = json::parse(*text, nullptr, false);
  if (!doc.is_object() || !doc.contains("cases")) return json();
  for (const json& c : doc["cases"]) {
    if (c.value("case", "") == f.name) {
      json out = c;
      out["device_name"] = doc["environment"].value("device_name", "");
      out["environment"] = doc["environment"];
      return out;
    }
  }
  return json();
}

habitat::v1::Precision PrecisionOf(const std::string& case_name) {
  if (absl::EndsWith(case_name, "_bf16")) return habitat::v1::PRECISION_AMP_BF16;
  if (absl::EndsWith(case_name, "_fp16")) return habitat::v1::PRECISION_AMP_FP16;
  return habitat::v1::PRECISION_FP32;
}

int64_t MetaInt(const habitat::v1::Trace& t, const std::string& key) {
  auto it = t.metadata().find(key);
  int64_t v = -1;
  if (it == t.metadata().end() || !absl::SimpleAtoi(it->second, &v)) {
    ADD_FAILURE() << "metadata " << key << " missing or not an integer";
  }
  return v;
}

const Loaded& LoadFixture(const Fixture& fixture) {
  static auto* cache = new std::map<std::string, Loaded>();
  auto it = cache->find(fixture.path);
  if (it != cache->end()) return it->second;
  const json measured = Measurement(fixture);
  KinetoImportOptions options;
  options.model_name = fixture.name.substr(0, fixture.name.find("_b"));
  options.batch_size = measured.is_object() ? measured.value("batch_size", 0u) : 1u;
  options.precision = PrecisionOf(fixture.name);
  Loaded loaded;
  auto text = ReadFile(fixture.path);
  EXPECT_TRUE(text.ok()) << text.status();
  loaded.text = text.ok() ? *std::move(text) : "";
  loaded.raw = json::parse(loaded.text, nullptr, false);
  auto trace = ImportKinetoTrace(loaded.text, options);
  EXPECT_TRUE(trace.ok()) << fixture.path << ": " << trace.status();
  if (trace.ok()) loaded.trace = *std::move(trace);
  return cache->emplace(fixture.path, std::move(loaded)).first->second;
}

}  // namespace testing
}  // namespace habitat
