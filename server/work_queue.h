// The threads that compute predictions and store uploads. gRPC's callback
// threads only admit a call (concurrency slot, token, deadline) and hand its
// work here, so calls beyond --max_concurrent_rpcs are refused at once with
// RESOURCE_EXHAUSTED instead of queueing invisibly inside gRPC, and the
// queue's length is a metric.
#pragma once

#include <deque>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace habitat {

class WorkQueue {
 public:
  // Starts `threads` workers (at least 1).
  explicit WorkQueue(int threads);
  // Runs what is queued, then joins the workers.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Runs `work` on a worker, in submission order. Never blocks and never
  // refuses: callers bound what they submit (admission slots).
  void Submit(absl::AnyInvocable<void() &&> work);

  // Submitted and not yet started.
  int waiting() const;

 private:
  void Run();

  mutable absl::Mutex mutex_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace habitat
