#include "core/store/trace_cache.h"

#include <utility>

#include "core/trace/parsed_size.h"

namespace habitat {

std::shared_ptr<const v1::Trace> TraceCache::Find(const std::string& key) {
  absl::MutexLock lock(&mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->trace;
}

void TraceCache::Insert(const std::string& key, std::shared_ptr<const v1::Trace> trace) {
  if (capacity_bytes_ == 0) return;
  // Measured outside the lock: it walks the whole trace.
  const size_t bytes = static_cast<size_t>(InMemoryBytes(*trace));
  if (bytes > capacity_bytes_) return;
  absl::MutexLock lock(&mutex_);
  if (index_.contains(key)) return;
  entries_.push_front(Entry{key, std::move(trace), bytes});
  index_[key] = entries_.begin();
  bytes_ += bytes;
  while (bytes_ > capacity_bytes_) {
    bytes_ -= entries_.back().bytes;
    index_.erase(entries_.back().key);
    entries_.pop_back();
  }
}

size_t TraceCache::bytes() const {
  absl::MutexLock lock(&mutex_);
  return bytes_;
}

void TraceCache::Clear() {
  absl::MutexLock lock(&mutex_);
  entries_.clear();
  index_.clear();
  bytes_ = 0;
}

}  // namespace habitat
