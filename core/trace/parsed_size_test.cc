#include "core/trace/parsed_size.h"

#include <string>

#include "common/file_io.h"
#include "gtest/gtest.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {
namespace {

// Within [1, 2] times what the parsed message holds: never under it (the
// server refuses on it), not so far over that honest traces are refused.
void ExpectTracks(const v1::Trace& trace) {
  const std::string wire = trace.SerializeAsString();
  const absl::StatusOr<int64_t> estimate = EstimateParsedBytes(*v1::Trace::descriptor(), wire);
  ASSERT_TRUE(estimate.ok()) << estimate.status();
  const int64_t held = InMemoryBytes(trace);
  EXPECT_GE(*estimate, held) << "wire " << wire.size();
  EXPECT_LE(*estimate, 2 * held) << "wire " << wire.size();
}

TEST(ParsedSizeTest, TracksRealTraces) {
  for (const char* name : {"resnet50_b16_fp32", "gpt2_b8_fp32", "transformer_b32_fp32"}) {
    SCOPED_TRACE(name);
    auto bytes =
        ReadFile(std::string(HABITAT_TESTDATA_DIR) + "/agent_suite/h100/" + name + ".trace.gz");
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    v1::Trace trace;
    ASSERT_TRUE(trace.ParseFromString(*bytes));
    ExpectTracks(trace);
  }
}

// Empty arguments: 2 bytes each on the wire, a heap message in memory.
TEST(ParsedSizeTest, SeesTheAmplificationOfEmptyArguments) {
  v1::Trace trace;
  for (int i = 0; i < 2000; ++i) {
    v1::Operation* op = trace.add_operations();
    op->set_name("aten::add");
    for (int a = 0; a < 256; ++a) op->add_arguments();
  }
  ExpectTracks(trace);
  const auto estimate = EstimateParsedBytes(*v1::Trace::descriptor(), trace.SerializeAsString());
  ASSERT_TRUE(estimate.ok());
  EXPECT_GT(*estimate, 9 * static_cast<int64_t>(trace.ByteSizeLong()));
}

TEST(ParsedSizeTest, StopsEarlyAboveTheLimit) {
  v1::Trace trace;
  for (int i = 0; i < 1000; ++i) trace.add_operations()->add_arguments();
  const std::string wire = trace.SerializeAsString();
  const auto full = EstimateParsedBytes(*v1::Trace::descriptor(), wire);
  const auto stopped = EstimateParsedBytes(*v1::Trace::descriptor(), wire, 1000);
  ASSERT_TRUE(full.ok() && stopped.ok());
  EXPECT_GT(*stopped, 1000);
  EXPECT_LT(*stopped, *full);
}

TEST(ParsedSizeTest, RefusesMalformedBytes) {
  v1::Trace trace;
  trace.add_operations()->set_name("aten::mm");
  std::string wire = trace.SerializeAsString();
  wire.resize(wire.size() - 2);  // cut inside the operation
  EXPECT_EQ(EstimateParsedBytes(*v1::Trace::descriptor(), wire).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(EstimateParsedBytes(*v1::Trace::descriptor(), std::string("\x0a\xff", 2)).ok());
}

}  // namespace
}  // namespace habitat
