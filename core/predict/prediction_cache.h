// Memoises per-(trace, device) predictions so a scheduler repeating a
// Predict pays a lookup. Bounded LRU, safe for concurrent use.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "habitat/v1/prediction_service.pb.h"

namespace habitat {

// A memoised prediction, with and without the per-operation breakdown, so
// that answering without a breakdown copies no operations.
struct CachedPrediction {
  std::shared_ptr<const habitat::v1::DevicePrediction> full;
  std::shared_ptr<const habitat::v1::DevicePrediction> summary;
};

class PredictionCache {
 public:
  explicit PredictionCache(size_t capacity) : capacity_(capacity) {}

  // Empty pointers on a miss. Entries are shared and immutable.
  CachedPrediction Lookup(const std::string& trace_id, const std::string& device_id);

  void Insert(const std::string& trace_id, const std::string& device_id,
              CachedPrediction prediction);

  size_t size() const;

 private:
  using Key = std::pair<std::string, std::string>;
  struct Entry {
    CachedPrediction prediction;
    std::list<Key>::iterator position;
  };

  const size_t capacity_;
  mutable absl::Mutex mutex_;
  std::list<Key> recency_ ABSL_GUARDED_BY(mutex_);  // front = most recent
  absl::flat_hash_map<Key, Entry> entries_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace habitat
