// A bounded, least-recently-used cache of parsed traces, shared by the
// stores that persist: a Predict by id should not parse the trace again.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

class TraceCache {
 public:
  // At most `capacity_bytes` of parsed traces, as they sit in memory
  // (InMemoryBytes: 9-22x their serialised size, which is therefore not
  // what is charged); 0 caches nothing.
  explicit TraceCache(size_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // The cache key of a tenant's trace ('\n' cannot be in a tenant name).
  static std::string Key(const std::string& tenant, const std::string& id) {
    return tenant + '\n' + id;
  }

  // Null when absent.
  std::shared_ptr<const habitat::v1::Trace> Find(const std::string& key);
  // A trace larger than the whole cache is not kept.
  void Insert(const std::string& key, std::shared_ptr<const habitat::v1::Trace> trace);
  // What the cached traces hold in memory.
  size_t bytes() const;
  void Clear();

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const habitat::v1::Trace> trace;
    size_t bytes;
  };
  const size_t capacity_bytes_;
  mutable absl::Mutex mutex_;
  // Most recently used first.
  std::list<Entry> entries_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mutex_);
  size_t bytes_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace habitat
