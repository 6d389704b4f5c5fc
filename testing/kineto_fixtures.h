// The real-GPU torch.profiler fixtures (tests/testdata/kineto/<gpu>/,
// captured by eval/capture/capture_fixtures.py) as traces, labelled with
// the batch size and precision their file names carry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "habitat/v1/trace.pb.h"

namespace habitat::testing {

// The fixture the server tests predict from (captured on an H100),
// relative to the testdata dir.
inline constexpr char kFixtureTrace[] = "kineto/h100/resnet50_b16_fp32.json.gz";

// What a fixture's name says: <model>_b<batch>_<precision>.json.gz (the
// model name may hold '_'; the capture names autocast runs "bf16" and
// "fp16"). INVALID_ARGUMENT for another name.
struct FixtureLabels {
  std::string model_name;
  uint32_t batch_size = 0;
  habitat::v1::Precision precision = habitat::v1::PRECISION_UNSPECIFIED;
};
absl::StatusOr<FixtureLabels> ParseFixtureName(const std::string& path);

// Imports tests/testdata/<relative> with the labels its name carries.
absl::StatusOr<habitat::v1::Trace> LoadFixtureTrace(const std::string& relative);

// The H100 fixtures (tests/testdata/kineto/h100), the first `count` in
// name order; NOT_FOUND when there are fewer.
absl::StatusOr<std::vector<habitat::v1::Trace>> LoadFixtureTraces(int count);

}  // namespace habitat::testing
