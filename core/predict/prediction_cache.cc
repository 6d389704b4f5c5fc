#include "core/predict/prediction_cache.h"

namespace habitat {

CachedPrediction PredictionCache::Lookup(const std::string& trace_id,
                                         const std::string& device_id) {
  absl::MutexLock lock(&mutex_);
  auto it = entries_.find(Key(trace_id, device_id));
  if (it == entries_.end()) return {};
  recency_.splice(recency_.begin(), recency_, it->second.position);
  return it->second.prediction;
}

void PredictionCache::Insert(const std::string& trace_id, const std::string& device_id,
                             CachedPrediction prediction) {
  if (capacity_ == 0) return;
  absl::MutexLock lock(&mutex_);
  Key key(trace_id, device_id);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    it->second.prediction = std::move(prediction);
    recency_.splice(recency_.begin(), recency_, it->second.position);
    return;
  }
  recency_.push_front(key);
  entries_.emplace(std::move(key), Entry{std::move(prediction), recency_.begin()});
  while (entries_.size() > capacity_) {
    entries_.erase(recency_.back());
    recency_.pop_back();
  }
}

size_t PredictionCache::size() const {
  absl::MutexLock lock(&mutex_);
  return entries_.size();
}

}  // namespace habitat
