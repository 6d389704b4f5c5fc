#include "core/predict/prediction_cache.h"

namespace habitat {
namespace {

// What an entry costs: its messages, its key twice (map and recency list)
// and the bookkeeping around them.
size_t EntryBytes(const std::string& trace_id, const std::string& device_id,
                  const CachedPrediction& prediction) {
  constexpr size_t kOverhead = 256;
  size_t bytes = kOverhead + 2 * (trace_id.size() + device_id.size());
  // `full` and `summary` share nothing; a summary-only entry has no full.
  if (prediction.summary != nullptr) bytes += prediction.summary->SpaceUsedLong();
  if (prediction.full != nullptr) bytes += prediction.full->SpaceUsedLong();
  return bytes;
}

}  // namespace

CachedPrediction PredictionCache::Lookup(const std::string& trace_id,
                                         const std::string& device_id) {
  absl::MutexLock lock(&mutex_);
  auto it = entries_.find(Key(trace_id, device_id));
  if (it == entries_.end()) return {};
  recency_.splice(recency_.begin(), recency_, it->second.position);
  return it->second.prediction;
}

void PredictionCache::EraseLocked(std::list<Key>::iterator position) {
  auto it = entries_.find(*position);
  bytes_ -= it->second.bytes;
  entries_.erase(it);
  recency_.erase(position);
}

void PredictionCache::Insert(const std::string& trace_id, const std::string& device_id,
                             CachedPrediction prediction) {
  if (max_entries_ == 0 || max_bytes_ == 0) return;
  // Measured outside the lock: SpaceUsedLong walks the whole message.
  const size_t bytes = EntryBytes(trace_id, device_id, prediction);
  absl::MutexLock lock(&mutex_);
  Key key(trace_id, device_id);
  auto it = entries_.find(key);
  if (it != entries_.end()) EraseLocked(it->second.position);
  if (bytes > max_bytes_) return;
  recency_.push_front(key);
  entries_.emplace(std::move(key), Entry{std::move(prediction), bytes, recency_.begin()});
  bytes_ += bytes;
  while (entries_.size() > max_entries_ || bytes_ > max_bytes_) {
    EraseLocked(std::prev(recency_.end()));
  }
}

size_t PredictionCache::size() const {
  absl::MutexLock lock(&mutex_);
  return entries_.size();
}

size_t PredictionCache::bytes() const {
  absl::MutexLock lock(&mutex_);
  return bytes_;
}

}  // namespace habitat
