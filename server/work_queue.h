// The threads that compute predictions and store uploads. gRPC's callback
// threads only admit a call (concurrency slot, token, deadline) and hand its
// work here, so calls beyond --max_concurrent_rpcs are refused at once with
// RESOURCE_EXHAUSTED instead of queueing invisibly inside gRPC, and the
// queue's length is a metric.
//
// Work is queued per tenant. A free worker takes the oldest work of the
// tenant running the fewest, and no tenant holds more than its share of the
// workers at once: with tenants (a token file) one worker is always left to
// the others, so that one tenant's expensive calls cannot starve every other
// (docs/operations.md, "CPU budget").
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace habitat {

class WorkQueue {
 public:
  // Starts `threads` workers (at least 1), of which one tenant holds at
  // most `per_tenant` at once (clamped to [1, threads]; 0: all of them).
  explicit WorkQueue(int threads, int per_tenant = 0);
  // Runs what is queued, then joins the workers.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Runs `work` on a worker as `tenant`'s, in submission order within the
  // tenant. Never blocks and never refuses: callers bound what they submit
  // (admission slots).
  void Submit(std::string tenant, absl::AnyInvocable<void() &&> work);
  void Submit(absl::AnyInvocable<void() &&> work) { Submit("", std::move(work)); }

  // Submitted and not yet started.
  int waiting() const;
  // The most workers one tenant holds at once.
  int per_tenant() const { return per_tenant_; }

 private:
  struct Queued {
    uint64_t order = 0;
    absl::AnyInvocable<void() &&> work;
  };
  struct Tenant {
    std::deque<Queued> queued;
    int running = 0;
  };

  void Run();
  // The tenant whose work a free worker runs next; end() when none may.
  std::map<std::string, Tenant>::iterator NextTenant() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool CanStart() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const int per_tenant_;
  mutable absl::Mutex mutex_;
  std::map<std::string, Tenant> tenants_ ABSL_GUARDED_BY(mutex_);
  uint64_t submitted_ ABSL_GUARDED_BY(mutex_) = 0;
  int waiting_ ABSL_GUARDED_BY(mutex_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace habitat
