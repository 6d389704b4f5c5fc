#include "core/backend/answer_cache.h"

#include <iterator>
#include <utility>

namespace habitat {

CachedAnswer AnswerCache::Lookup(const std::string& key) {
  absl::MutexLock lock(&mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return {};
  recency_.splice(recency_.begin(), recency_, it->second.position);
  return it->second.answer;
}

void AnswerCache::EraseLocked(std::list<std::string>::iterator position) {
  auto it = entries_.find(*position);
  bytes_ -= it->second.bytes;
  entries_.erase(it);
  recency_.erase(position);
}

void AnswerCache::Insert(const std::string& key, CachedAnswer answer) {
  if (!enabled() || answer.bytes == nullptr) return;
  // The key is held twice (map and recency list), plus bookkeeping.
  constexpr size_t kOverhead = 128;
  const size_t bytes = kOverhead + 2 * key.size() + answer.bytes->size();
  absl::MutexLock lock(&mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end()) EraseLocked(it->second.position);
  if (bytes > max_bytes_) return;
  recency_.push_front(key);
  entries_.emplace(key, Entry{std::move(answer), bytes, recency_.begin()});
  bytes_ += bytes;
  while (entries_.size() > max_entries_ || bytes_ > max_bytes_) {
    EraseLocked(std::prev(recency_.end()));
  }
}

void AnswerCache::Clear() {
  absl::MutexLock lock(&mutex_);
  entries_.clear();
  recency_.clear();
  bytes_ = 0;
}

size_t AnswerCache::size() const {
  absl::MutexLock lock(&mutex_);
  return entries_.size();
}

size_t AnswerCache::bytes() const {
  absl::MutexLock lock(&mutex_);
  return bytes_;
}

}  // namespace habitat
