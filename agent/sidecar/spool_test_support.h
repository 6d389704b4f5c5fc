// Shared by the sidecar tests: real fixture traces written into a spool the
// way the tracker writes them (scratch directories, ports, child processes
// and the fixtures themselves: testing/).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "habitat/v1/trace.pb.h"

namespace habitat::agent::testing {

// `count` distinct traces made from the first `fixtures` H100 fixtures
// (::habitat::testing::LoadFixtureTraces): copy k of fixture i is the
// real trace with metadata["spool_test_copy"] = k, so each has its own
// content id while every timing stays a measured one.
absl::StatusOr<std::vector<habitat::v1::Trace>> DistinctTraces(int fixtures, int count);

// NAME.trace.tmp, then rename to NAME.trace: the writer side of the protocol.
// gzip: compress the serialised trace.
void WriteSpoolTrace(const std::string& dir, const std::string& name,
                     const habitat::v1::Trace& trace, bool gzip);
// Raw bytes under `name` through the same tmp-and-rename.
void WriteSpoolBytes(const std::string& dir, const std::string& name, const std::string& bytes);

// ComputeTraceId, or a test failure.
std::string IdOf(const habitat::v1::Trace& trace);

}  // namespace habitat::agent::testing
