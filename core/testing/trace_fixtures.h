// Loads the real captured traces and measurements in tests/testdata for
// core's tests. Test-only: BatchMemoryH100 reports failures through gtest.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "habitat/v1/trace.pb.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace testing {

// `gpu` is "h100" or "h200"; `name` e.g. "resnet50_b16_fp32". Imported as
// `habitat predict FILE` does: without `wall_ns` the profiler's estimated
// cost is taken out of the host timeline; with it (as --wall-ns) the
// timeline stays as profiled and the host model calibrates it.
absl::StatusOr<habitat::v1::Trace> LoadKinetoFixture(const std::string& gpu,
                                                     const std::string& name, uint32_t batch_size,
                                                     std::optional<int64_t> wall_ns = std::nullopt);

// An agent capture: tests/testdata/agent_suite/`folder`/`name`.trace.gz,
// e.g. ("h100_memory", "resnet50_b16_fp32").
absl::StatusOr<habitat::v1::Trace> LoadAgentFixture(const std::string& folder,
                                                    const std::string& name);

// The batch each model was captured at in the agent suites whose traces
// batch_memory measured around (h100_memory, h100_batch_rerun): it ran b/2,
// 2b and 4b of these.
const std::map<std::string, uint32_t>& AgentSuiteBatches();

// A batch_memory run (tests/testdata/batch_memory/`name`.json.gz, e.g.
// "h100" or "h200_largest").
absl::StatusOr<nlohmann::json> LoadBatchMemory(const std::string& name);

// One field of the H100 cases batch_memory ran, by "model_precision" and
// batch; empty (with a test failure) when the file cannot be read.
std::map<std::string, std::map<uint32_t, double>> BatchMemoryH100(const std::string& field);

// Median wall time measured without the profiler (tests/testdata/measurements).
absl::StatusOr<int64_t> MeasuredWallNs(const std::string& gpu, const std::string& name);

}  // namespace testing
}  // namespace habitat
