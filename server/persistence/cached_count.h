// The trace count of a shared (SQL) store without a COUNT(*) per upload:
// re-read at most every `refresh`, with this process's own inserts and
// deletes added in between. Other replicas' changes show after a refresh.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace habitat {

class CachedCount {
 public:
  explicit CachedCount(absl::Duration refresh) : refresh_(refresh) {}

  // `read` runs the COUNT(*) when the cached value is stale.
  absl::StatusOr<size_t> Get(const std::function<absl::StatusOr<int64_t>()>& read) {
    {
      absl::MutexLock lock(&mutex_);
      if (read_at_ != absl::InfinitePast() && absl::Now() - read_at_ < refresh_) {
        return static_cast<size_t>(count_ < 0 ? 0 : count_);
      }
    }
    // Outside the lock: the query may take a while. Changes made while it
    // runs may be counted twice until the next refresh.
    auto fresh = read();
    if (!fresh.ok()) return fresh.status();
    absl::MutexLock lock(&mutex_);
    count_ = *fresh;
    read_at_ = absl::Now();
    return static_cast<size_t>(count_);
  }

  void Add(int64_t delta) {
    absl::MutexLock lock(&mutex_);
    count_ += delta;
  }

 private:
  const absl::Duration refresh_;
  absl::Mutex mutex_;
  int64_t count_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::Time read_at_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
};

}  // namespace habitat
