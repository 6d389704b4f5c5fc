// The committed real-GPU torch.profiler fixtures
// (tests/testdata/kineto/<gpu>/<case>.json.gz) and what the capture script
// measured for them (tests/testdata/measurements/<gpu>.json), for the Kineto
// importer's tests. Test-only: reports failures through gtest.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "habitat/v1/trace.pb.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace testing {

struct Fixture {
  std::string gpu;   // "h100"
  std::string name;  // "resnet50_b16_fp32"
  std::string path;
};

// Keeps ctest's test names readable (gtest prints parameters' bytes otherwise).
inline void PrintTo(const Fixture& fixture, std::ostream* os) {
  *os << fixture.gpu << "/" << fixture.name;
}

// Every fixture, ordered by path.
std::vector<Fixture> ListFixtures();

// The capture script's record for the case; null json when absent.
nlohmann::json Measurement(const Fixture& f);

// The autocast precision a case's name ends with ("_bf16", "_fp16"); fp32
// otherwise.
habitat::v1::Precision PrecisionOf(const std::string& case_name);

// metadata[key] as an integer; -1, with a test failure, when it is not one.
int64_t MetaInt(const habitat::v1::Trace& t, const std::string& key);

// A fixture read, parsed and imported (without a wall time, as
// `habitat predict FILE` does), once for all tests.
struct Loaded {
  std::string text;
  nlohmann::json raw;
  habitat::v1::Trace trace;
};
const Loaded& LoadFixture(const Fixture& fixture);

}  // namespace testing
}  // namespace habitat
