// Validation tests on a real captured trace, mutated one field at a time.
#include "core/trace/trace_validation.h"

#include "gtest/gtest.h"

namespace habitat {
namespace {

// Checks the rules that need no fixture; the fixture-based cases live in
// tests/core (they need the Kineto importer).
TEST(TraceValidationTest, EmptyTraceNamesTheMissingField) {
  v1::Trace trace;
  absl::Status status = ValidateTrace(trace);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("origin"), absl::string_view::npos) << status;
}

}  // namespace
}  // namespace habitat
