#include "agent/sidecar/spool_test_support.h"

#include <cstdio>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "core/trace/trace_id.h"
#include "gtest/gtest.h"
#include "testing/kineto_fixtures.h"

namespace habitat::agent::testing {

absl::StatusOr<std::vector<v1::Trace>> DistinctTraces(int fixtures, int count) {
  HABITAT_ASSIGN_OR_RETURN(std::vector<v1::Trace> base,
                           ::habitat::testing::LoadFixtureTraces(fixtures));
  std::vector<v1::Trace> traces;
  for (int k = 0; static_cast<int>(traces.size()) < count; ++k) {
    for (const auto& trace : base) {
      if (static_cast<int>(traces.size()) == count) break;
      traces.push_back(trace);
      (*traces.back().mutable_metadata())["spool_test_copy"] = absl::StrCat(k);
    }
  }
  return traces;
}

void WriteSpoolBytes(const std::string& dir, const std::string& name, const std::string& bytes) {
  const std::string tmp = absl::StrCat(dir, "/", name, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary);
    out << bytes;
    ASSERT_TRUE(out.good()) << tmp;
  }
  ASSERT_EQ(std::rename(tmp.c_str(), absl::StrCat(dir, "/", name).c_str()), 0) << name;
}

void WriteSpoolTrace(const std::string& dir, const std::string& name, const v1::Trace& trace,
                     bool gzip) {
  std::string bytes;
  ASSERT_TRUE(trace.SerializeToString(&bytes));
  if (gzip) {
    auto compressed = Gzip(bytes);
    ASSERT_TRUE(compressed.ok()) << compressed.status();
    bytes = std::move(*compressed);
  }
  WriteSpoolBytes(dir, name, bytes);
}

std::string IdOf(const v1::Trace& trace) {
  auto id = ComputeTraceId(trace);
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : "";
}

}  // namespace habitat::agent::testing
