#include "core/trace/trace_id.h"

#include "gtest/gtest.h"

namespace habitat {
namespace {

v1::Trace SmallTrace() {
  v1::Trace trace;
  trace.set_model_name("m");
  trace.set_batch_size(8);
  (*trace.mutable_metadata())["a"] = "1";
  (*trace.mutable_metadata())["b"] = "2";
  trace.add_operations()->set_name("aten::relu");
  return trace;
}

TEST(TraceIdTest, SameContentSameId) {
  auto first = ComputeTraceId(SmallTrace());
  auto second = ComputeTraceId(SmallTrace());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_TRUE(IsWellFormedTraceId(*first)) << *first;
}

TEST(TraceIdTest, AnyChangeChangesTheId) {
  v1::Trace changed = SmallTrace();
  changed.set_batch_size(9);
  EXPECT_NE(*ComputeTraceId(SmallTrace()), *ComputeTraceId(changed));
}

TEST(TraceIdTest, WellFormedness) {
  EXPECT_FALSE(IsWellFormedTraceId(""));
  EXPECT_FALSE(IsWellFormedTraceId("sha256:abc"));
  EXPECT_FALSE(IsWellFormedTraceId("md5:" + std::string(64, 'a')));
  EXPECT_FALSE(IsWellFormedTraceId("sha256:" + std::string(64, 'G')));
  EXPECT_TRUE(IsWellFormedTraceId("sha256:" + std::string(64, 'a')));
}

}  // namespace
}  // namespace habitat
