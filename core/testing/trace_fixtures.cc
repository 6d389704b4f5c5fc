#include "core/testing/trace_fixtures.h"

#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/kineto/kineto_import.h"
#include "gtest/gtest.h"

#ifndef HABITAT_TESTDATA_DIR
#error "HABITAT_TESTDATA_DIR must be defined"
#endif

namespace habitat {
namespace testing {

absl::StatusOr<habitat::v1::Trace> LoadKinetoFixture(const std::string& gpu,
                                                     const std::string& name, uint32_t batch_size,
                                                     std::optional<int64_t> wall_ns) {
  HABITAT_ASSIGN_OR_RETURN(std::string json, ReadFile(std::string(HABITAT_TESTDATA_DIR) +
                                                      "/kineto/" + gpu + "/" + name + ".json.gz"));
  KinetoImportOptions options;
  options.model_name = name;
  options.batch_size = batch_size;
  if (wall_ns.has_value()) options.iteration_wall_ns = *wall_ns;
  return ImportKinetoTrace(json, options);
}

absl::StatusOr<habitat::v1::Trace> LoadAgentFixture(const std::string& folder,
                                                    const std::string& name) {
  const std::string path =
      std::string(HABITAT_TESTDATA_DIR) + "/agent_suite/" + folder + "/" + name + ".trace.gz";
  HABITAT_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  habitat::v1::Trace trace;
  if (!trace.ParseFromString(bytes)) return absl::DataLossError(path + " is not a Trace");
  return trace;
}

const std::map<std::string, uint32_t>& AgentSuiteBatches() {
  static const auto* batches = new std::map<std::string, uint32_t>{
      {"resnet50", 16}, {"inception_v3", 16}, {"transformer", 32}, {"gnmt", 32},
      {"dcgan", 64},    {"gpt2", 8},          {"vit", 32}};
  return *batches;
}

absl::StatusOr<nlohmann::json> LoadBatchMemory(const std::string& name) {
  HABITAT_ASSIGN_OR_RETURN(std::string text, ReadFile(std::string(HABITAT_TESTDATA_DIR) +
                                                      "/batch_memory/" + name + ".json.gz"));
  return nlohmann::json::parse(text);
}

std::map<std::string, std::map<uint32_t, double>> BatchMemoryH100(const std::string& field) {
  std::map<std::string, std::map<uint32_t, double>> out;
  auto doc = LoadBatchMemory("h100");
  EXPECT_TRUE(doc.ok()) << doc.status();
  if (!doc.ok()) return out;
  for (const auto& c : doc->at("cases")) {
    if (c.at("status") != "ok") continue;
    out[c.at("model").get<std::string>() + "_" + c.at("precision").get<std::string>()]
       [c.at("batch").get<uint32_t>()] = c.at(field).get<double>();
  }
  return out;
}

absl::StatusOr<int64_t> MeasuredWallNs(const std::string& gpu, const std::string& name) {
  HABITAT_ASSIGN_OR_RETURN(std::string text, ReadFile(std::string(HABITAT_TESTDATA_DIR) +
                                                      "/measurements/" + gpu + ".json"));
  const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("measurements are not JSON");
  for (const auto& c : doc.at("cases")) {
    if (c.at("case") == name) return c.at("wall_ns_median").get<int64_t>();
  }
  return absl::NotFoundError(name + " not in the measurements of " + gpu);
}

}  // namespace testing
}  // namespace habitat
