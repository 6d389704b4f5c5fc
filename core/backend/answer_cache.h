// Serialised PredictResponses, so that a repeated Predict by trace id costs
// a lookup and a send instead of copying, pricing and serialising 21
// predictions again (docs/benchmarks.md, "Warm path"). LRU, bounded in
// entries and bytes, safe for concurrent use. PredictionBackend owns the
// keys and what they must hold.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace habitat {

struct CachedAnswer {
  // The PredictResponse's bytes; shared and immutable.
  std::shared_ptr<const std::string> bytes;
  // How many GPU predictions it holds (for the cache-hit metric).
  int predictions = 0;
};

class AnswerCache {
 public:
  // Either bound 0: nothing is kept.
  AnswerCache(size_t max_entries, size_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // Empty `bytes` on a miss.
  CachedAnswer Lookup(const std::string& key);
  // Replaces any entry under the same key; an answer larger than the whole
  // budget is not kept.
  void Insert(const std::string& key, CachedAnswer answer);
  void Clear();

  bool enabled() const { return max_entries_ > 0 && max_bytes_ > 0; }
  size_t size() const;
  // Bytes held, as counted against max_bytes: answers and keys.
  size_t bytes() const;

 private:
  struct Entry {
    CachedAnswer answer;
    size_t bytes = 0;
    std::list<std::string>::iterator position;
  };

  void EraseLocked(std::list<std::string>::iterator position) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const size_t max_entries_;
  const size_t max_bytes_;
  mutable absl::Mutex mutex_;
  std::list<std::string> recency_ ABSL_GUARDED_BY(mutex_);  // front = most recent
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mutex_);
  size_t bytes_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace habitat
