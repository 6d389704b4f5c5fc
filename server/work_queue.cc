#include "server/work_queue.h"

#include <algorithm>
#include <utility>

namespace habitat {

WorkQueue::WorkQueue(int threads, int per_tenant)
    : per_tenant_(per_tenant <= 0 ? std::max(1, threads)
                                  : std::clamp(per_tenant, 1, std::max(1, threads))) {
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

void WorkQueue::Submit(std::string tenant, absl::AnyInvocable<void() &&> work) {
  absl::MutexLock lock(&mutex_);
  tenants_[std::move(tenant)].queued.push_back(Queued{submitted_++, std::move(work)});
  ++waiting_;
}

int WorkQueue::waiting() const {
  absl::MutexLock lock(&mutex_);
  return waiting_;
}

std::map<std::string, WorkQueue::Tenant>::iterator WorkQueue::NextTenant() {
  auto best = tenants_.end();
  for (auto it = tenants_.begin(); it != tenants_.end(); ++it) {
    const Tenant& t = it->second;
    if (t.queued.empty() || t.running >= per_tenant_) continue;
    if (best == tenants_.end() || t.running < best->second.running ||
        (t.running == best->second.running &&
         t.queued.front().order < best->second.queued.front().order)) {
      best = it;
    }
  }
  return best;
}

bool WorkQueue::CanStart() { return NextTenant() != tenants_.end(); }

void WorkQueue::Run() {
  while (true) {
    absl::AnyInvocable<void() &&> work;
    std::map<std::string, Tenant>::iterator tenant;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(
          +[](WorkQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mutex_) {
            return q->CanStart() || (q->stopping_ && q->waiting_ == 0);
          },
          this));
      tenant = NextTenant();
      if (tenant == tenants_.end()) return;  // stopping, and nothing left to run
      work = std::move(tenant->second.queued.front().work);
      tenant->second.queued.pop_front();
      ++tenant->second.running;
      --waiting_;
    }
    std::move(work)();
    absl::MutexLock lock(&mutex_);
    // A tenant with nothing queued or running is forgotten: tenants come
    // and go, and the map must not grow with every one ever seen.
    if (--tenant->second.running == 0 && tenant->second.queued.empty()) tenants_.erase(tenant);
  }
}

}  // namespace habitat
