// Memoises per-(trace, device) predictions so a scheduler repeating a
// Predict pays a lookup. LRU, bounded in entries and in bytes, safe for
// concurrent use.
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

// A memoised prediction: `summary` always (no per-operation breakdown), and
// `full` (with it) only when a caller asked for the breakdown. The breakdown
// repeats every operation of the trace per GPU, so it is the bulk of an
// entry; answering without one copies no operations.
struct CachedPrediction {
  std::shared_ptr<const habitat::v1::DevicePrediction> full;
  std::shared_ptr<const habitat::v1::DevicePrediction> summary;
};

// The server's default byte budget (--cache_mib).
inline constexpr size_t kDefaultPredictionCacheBytes = size_t{256} << 20;

class PredictionCache {
 public:
  // Keeps at most `max_entries` entries and about `max_bytes` bytes (the
  // messages' SpaceUsedLong plus the keys); an entry larger than the whole
  // budget is not kept. Either bound 0: nothing is kept.
  PredictionCache(size_t max_entries, size_t max_bytes = kDefaultPredictionCacheBytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // Empty pointers on a miss. Entries are shared and immutable.
  CachedPrediction Lookup(const std::string& trace_id, const std::string& device_id);

  // Replaces any entry under the same key.
  void Insert(const std::string& trace_id, const std::string& device_id,
              CachedPrediction prediction);

  size_t size() const;
  // Bytes held by the entries, as counted against max_bytes.
  size_t bytes() const;

 private:
  using Key = std::pair<std::string, std::string>;
  struct Entry {
    CachedPrediction prediction;
    size_t bytes = 0;
    std::list<Key>::iterator position;
  };

  void EraseLocked(std::list<Key>::iterator position) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const size_t max_entries_;
  const size_t max_bytes_;
  mutable absl::Mutex mutex_;
  std::list<Key> recency_ ABSL_GUARDED_BY(mutex_);  // front = most recent
  absl::flat_hash_map<Key, Entry> entries_ ABSL_GUARDED_BY(mutex_);
  size_t bytes_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace habitat
