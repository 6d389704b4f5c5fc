// Loads the real captured traces in tests/testdata for core tests.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/kineto/kineto_import.h"
#include "gtest/gtest.h"
#include "habitat/v1/trace.pb.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace testing {

// `gpu` is "h100" or "h200"; `name` e.g. "resnet50_b16_fp32". Imported as
// `habitat predict FILE` does: without `wall_ns` the profiler's estimated
// cost is taken out of the host timeline; with it (as --wall-ns) the
// timeline stays as profiled and the host model calibrates it.
inline absl::StatusOr<habitat::v1::Trace> LoadKinetoFixture(
    const std::string& gpu, const std::string& name, uint32_t batch_size,
    std::optional<int64_t> wall_ns = std::nullopt) {
  HABITAT_ASSIGN_OR_RETURN(std::string json, ReadFile(std::string(HABITAT_TESTDATA_DIR) +
                                                      "/kineto/" + gpu + "/" + name + ".json.gz"));
  KinetoImportOptions options;
  options.model_name = name;
  options.batch_size = batch_size;
  if (wall_ns.has_value()) options.iteration_wall_ns = *wall_ns;
  return ImportKinetoTrace(json, options);
}

// An agent capture: tests/testdata/agent_suite/`folder`/`name`.trace.gz,
// e.g. ("h100_memory", "resnet50_b16_fp32").
inline absl::StatusOr<habitat::v1::Trace> LoadAgentFixture(const std::string& folder,
                                                           const std::string& name) {
  const std::string path =
      std::string(HABITAT_TESTDATA_DIR) + "/agent_suite/" + folder + "/" + name + ".trace.gz";
  HABITAT_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  habitat::v1::Trace trace;
  if (!trace.ParseFromString(bytes)) return absl::DataLossError(path + " is not a Trace");
  return trace;
}

// The batch each model was captured at in the agent suites whose traces
// batch_memory measured around (h100_memory, h100_batch_rerun): it ran b/2,
// 2b and 4b of these.
inline const std::map<std::string, uint32_t>& AgentSuiteBatches() {
  static const auto* batches = new std::map<std::string, uint32_t>{
      {"resnet50", 16}, {"inception_v3", 16}, {"transformer", 32}, {"gnmt", 32},
      {"dcgan", 64},    {"gpt2", 8},          {"vit", 32}};
  return *batches;
}

// A batch_memory run (tests/testdata/batch_memory/`name`.json.gz, e.g.
// "h100" or "h200_largest").
inline absl::StatusOr<nlohmann::json> LoadBatchMemory(const std::string& name) {
  HABITAT_ASSIGN_OR_RETURN(std::string text, ReadFile(std::string(HABITAT_TESTDATA_DIR) +
                                                      "/batch_memory/" + name + ".json.gz"));
  return nlohmann::json::parse(text);
}

// One field of the H100 cases batch_memory ran, by "model_precision" and
// batch; empty (with a test failure) when the file cannot be read.
inline std::map<std::string, std::map<uint32_t, double>> BatchMemoryH100(const std::string& field) {
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

// Median wall time measured without the profiler (tests/testdata/measurements).
inline absl::StatusOr<int64_t> MeasuredWallNs(const std::string& gpu, const std::string& name) {
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
