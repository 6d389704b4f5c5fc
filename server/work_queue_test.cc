// The work queue's per-tenant share: one tenant's long calls leave a worker
// to another tenant, which then runs before the first tenant's backlog.
#include "server/work_queue.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

// Records the order in which work started.
class StartLog {
 public:
  void Add(const std::string& name) {
    absl::MutexLock lock(&mutex_);
    started_.push_back(name);
  }
  std::vector<std::string> started() const {
    absl::MutexLock lock(&mutex_);
    return started_;
  }
  bool WaitFor(size_t count) const {
    absl::MutexLock lock(&mutex_);
    want_ = count;
    return mutex_.AwaitWithTimeout(absl::Condition(this, &StartLog::Enough), kWait);
  }

 private:
  bool Enough() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return started_.size() >= want_; }

  mutable absl::Mutex mutex_;
  std::vector<std::string> started_ ABSL_GUARDED_BY(mutex_);
  mutable size_t want_ ABSL_GUARDED_BY(mutex_) = 0;
};

TEST(WorkQueueTest, OneTenantCannotHoldEveryWorker) {
  StartLog log;
  absl::Notification release;
  {
    WorkQueue queue(2, 1);
    EXPECT_EQ(queue.per_tenant(), 1);
    for (int i = 0; i < 3; ++i) {
      queue.Submit("a", [&log, &release, i] {
        log.Add("a" + std::to_string(i));
        release.WaitForNotificationWithTimeout(kWait);
      });
    }
    ASSERT_TRUE(log.WaitFor(1));
    // a0 holds a worker; a1 and a2 wait for a's share, not for a worker.
    queue.Submit("b", [&log] { log.Add("b0"); });
    ASSERT_TRUE(log.WaitFor(2));
    EXPECT_EQ(log.started()[1], "b0");
    EXPECT_EQ(queue.waiting(), 2);
    release.Notify();
  }  // the destructor runs what is queued
  EXPECT_EQ(log.started(), (std::vector<std::string>{"a0", "b0", "a1", "a2"}));
}

TEST(WorkQueueTest, WithoutASharedLimitATenantUsesEveryWorker) {
  std::atomic<int> at_once{0};
  std::atomic<int> most{0};
  absl::Notification release;
  StartLog log;
  {
    WorkQueue queue(3);
    EXPECT_EQ(queue.per_tenant(), 3);
    for (int i = 0; i < 3; ++i) {
      queue.Submit([&] {
        most = std::max(most.load(), ++at_once);
        log.Add("x");
        release.WaitForNotificationWithTimeout(kWait);
        --at_once;
      });
    }
    ASSERT_TRUE(log.WaitFor(3));
    release.Notify();
  }
  EXPECT_EQ(most.load(), 3);
}

// Free workers go to the tenant running the fewest, oldest work first.
TEST(WorkQueueTest, TheTenantRunningFewestGoesFirst) {
  StartLog log;
  absl::Notification release;
  {
    WorkQueue queue(1);
    queue.Submit("a", [&] {
      log.Add("a0");
      release.WaitForNotificationWithTimeout(kWait);
    });
    ASSERT_TRUE(log.WaitFor(1));
    queue.Submit("a", [&] { log.Add("a1"); });
    queue.Submit("b", [&] { log.Add("b0"); });
    queue.Submit("a", [&] { log.Add("a2"); });
    release.Notify();
  }
  // One worker: the oldest queued first, each tenant running none by then.
  EXPECT_EQ(log.started(), (std::vector<std::string>{"a0", "a1", "b0", "a2"}));
}

}  // namespace
}  // namespace habitat
