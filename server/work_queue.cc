#include "server/work_queue.h"

#include <algorithm>
#include <utility>

namespace habitat {

WorkQueue::WorkQueue(int threads) {
  const int count = std::max(1, threads);
  workers_.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) workers_.emplace_back([this] { Run(); });
}

WorkQueue::~WorkQueue() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  for (auto& worker : workers_) worker.join();
}

void WorkQueue::Submit(absl::AnyInvocable<void() &&> work) {
  absl::MutexLock lock(&mutex_);
  queue_.push_back(std::move(work));
}

int WorkQueue::waiting() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int>(queue_.size());
}

void WorkQueue::Run() {
  while (true) {
    absl::AnyInvocable<void() &&> work;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(
          +[](WorkQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mutex_) {
            return q->stopping_ || !q->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, and nothing left to run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(work)();
  }
}

}  // namespace habitat
