#include "core/store/trace_cache.h"

#include <memory>

#include "core/trace/parsed_size.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

// 2,000 operations of 64 empty arguments: ~260 KB on the wire, ~35 times
// that parsed.
std::shared_ptr<const v1::Trace> ArgumentHeavyTrace() {
  auto trace = std::make_shared<v1::Trace>();
  for (int i = 0; i < 2000; ++i) {
    v1::Operation* op = trace->add_operations();
    op->set_name("aten::add");
    for (int a = 0; a < 64; ++a) op->add_arguments();
  }
  return trace;
}

TEST(TraceCacheTest, ChargesWhatTheParsedTraceHolds) {
  const auto trace = ArgumentHeavyTrace();
  const size_t wire = trace->ByteSizeLong();
  TraceCache cache(size_t{64} << 20);
  cache.Insert("a", trace);
  EXPECT_GE(cache.bytes(), trace->SpaceUsedLong());
  EXPECT_GT(cache.bytes(), 9 * wire);
}

// A cache sized for ten such traces by their wire size holds none: each is
// larger in memory than the whole budget.
TEST(TraceCacheTest, KeepsNoTraceLargerInMemoryThanTheBudget) {
  const auto trace = ArgumentHeavyTrace();
  TraceCache cache(10 * trace->ByteSizeLong());
  cache.Insert("a", trace);
  EXPECT_EQ(cache.Find("a"), nullptr);
  EXPECT_EQ(cache.bytes(), 0u);
}

TEST(TraceCacheTest, EvictsByMemoryNotByWireSize) {
  const auto trace = ArgumentHeavyTrace();
  const size_t held = static_cast<size_t>(InMemoryBytes(*trace));
  TraceCache cache(2 * held + held / 2);
  for (const char* key : {"a", "b", "c"}) cache.Insert(key, trace);
  EXPECT_EQ(cache.Find("a"), nullptr);
  EXPECT_NE(cache.Find("b"), nullptr);
  EXPECT_NE(cache.Find("c"), nullptr);
  EXPECT_LE(cache.bytes(), 2 * held + held / 2);
}

}  // namespace
}  // namespace habitat
