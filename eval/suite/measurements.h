// The measured side of the end-to-end evaluation: one GPU's
// tests/testdata/measurements/<tag>.json (written by
// eval/capture/capture_fixtures.py), reduced to what the
// evaluation compares predictions against.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/time_units.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {
namespace eval {

struct MeasuredCase {
  std::string name;   // "resnet50_b16_fp32": also the fixture's file name
  std::string model;  // "resnet50"
  uint32_t batch = 0;
  std::string precision;  // "fp32" or "bf16" (autocast)
  // Medians: wall time of unprofiled iterations, GPU-busy time (union of
  // kernel, memcpy and memset intervals) of the profiled ones.
  Nanoseconds wall_ns = 0;
  Nanoseconds busy_ns = 0;
  // 1 - busy / wall, as the capture computed it.
  double host_share = 0;
};

// Cases by name. INVALID_ARGUMENT naming the file, the case index and the
// field when the document lacks a field or has a value of the wrong type or
// out of range; the error of ReadFile when it cannot be read.
absl::StatusOr<std::map<std::string, MeasuredCase>> LoadMeasurements(const std::string& path);

// The trace precision of a measurement's "precision": bf16 cases ran under
// autocast. INVALID_ARGUMENT for anything else.
absl::StatusOr<habitat::v1::Precision> TracePrecision(const std::string& precision);

}  // namespace eval
}  // namespace habitat
