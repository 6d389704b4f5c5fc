// What every TraceStore must do, as a value-parameterised suite: each store
// test instantiates TraceStoreConformanceTest with its StoreUnderTest.
#pragma once

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/store/trace_store.h"
#include "gtest/gtest.h"
#include "habitat/v1/trace.pb.h"

namespace habitat::testing {

// One fresh, empty store location (a file, a directory, a database).
class StoreUnderTest {
 public:
  virtual ~StoreUnderTest() = default;
  // Opens the store; for persistent stores a second call opens the same
  // data again, as a restarted server would.
  virtual absl::StatusOr<std::unique_ptr<TraceStore>> Open(TraceStoreOptions options) = 0;
  virtual bool persistent() const = 0;
};

struct StoreKind {
  std::string name;  // test name suffix
  std::function<std::unique_ptr<StoreUnderTest>()> make;
};
// So that ctest lists the store's name, not the object's bytes.
inline void PrintTo(const StoreKind& kind, std::ostream* os) { *os << kind.name; }

// `count` distinct real traces: the H100 DCGAN and ResNet-50 captures
// (tests/testdata/kineto/h100), copy k carrying metadata["store_test_copy"]
// = k so that each has its own content id while every timing is measured.
std::vector<habitat::v1::Trace> RealTraces(int count);

// A clock tests move by hand.
class FakeClock {
 public:
  explicit FakeClock(absl::Time start) : now_ns_(absl::ToUnixNanos(start)) {}
  absl::Time Now() const { return absl::FromUnixNanos(now_ns_.load()); }
  void Advance(absl::Duration by) { now_ns_ += absl::ToInt64Nanoseconds(by); }
  Clock AsClock() {
    return [this] { return Now(); };
  }

 private:
  std::atomic<int64_t> now_ns_;
};

// A fresh directory under /tmp, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    char pattern[] = "/tmp/habitat_store_XXXXXX";
    path_ = mkdtemp(pattern) != nullptr ? pattern : "";
    EXPECT_FALSE(path_.empty());
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool SameTrace(const habitat::v1::Trace& a, const habitat::v1::Trace& b);

class TraceStoreConformanceTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  // A null location skips the test (make() records a failure first unless
  // skipping is legitimate, e.g. no PostgreSQL installed).
  void SetUp() override {
    location_ = GetParam().make();
    if (location_ == nullptr) GTEST_SKIP() << GetParam().name << " is not available here";
  }
  absl::StatusOr<std::unique_ptr<TraceStore>> Open(TraceStoreOptions options = {}) {
    return location_->Open(std::move(options));
  }
  std::unique_ptr<StoreUnderTest> location_;
};

}  // namespace habitat::testing
