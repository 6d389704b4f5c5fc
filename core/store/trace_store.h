// Where uploaded traces live. Ids are content addresses (ComputeTraceId), so
// storing the same trace twice keeps one copy.
#pragma once

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {

struct StoredTrace {
  std::string id;
  // False when the trace was already stored.
  bool created = false;
};

class TraceStore {
 public:
  virtual ~TraceStore() = default;
  // Stores a validated trace. The id is returned only once the trace is
  // durable (for stores that persist).
  virtual absl::StatusOr<StoredTrace> Put(const habitat::v1::Trace& trace) = 0;
  // NOT_FOUND for unknown ids.
  virtual absl::StatusOr<std::shared_ptr<const habitat::v1::Trace>> Get(
      const std::string& id) = 0;
  virtual size_t size() = 0;
};

// Keeps traces in memory: for the embedded CLI and tests.
class InMemoryTraceStore : public TraceStore {
 public:
  absl::StatusOr<StoredTrace> Put(const habitat::v1::Trace& trace) override;
  absl::StatusOr<std::shared_ptr<const habitat::v1::Trace>> Get(const std::string& id) override;
  size_t size() override;

 private:
  absl::Mutex mutex_;
  absl::flat_hash_map<std::string, std::shared_ptr<const habitat::v1::Trace>> traces_
      ABSL_GUARDED_BY(mutex_);
};

// One file per trace in a directory (written atomically with fsync), with an
// in-memory cache of what was read. Survives restarts.
class DirectoryTraceStore : public TraceStore {
 public:
  // Creates the directory if needed.
  static absl::StatusOr<std::unique_ptr<DirectoryTraceStore>> Open(const std::string& dir);

  absl::StatusOr<StoredTrace> Put(const habitat::v1::Trace& trace) override;
  absl::StatusOr<std::shared_ptr<const habitat::v1::Trace>> Get(const std::string& id) override;
  size_t size() override;

 private:
  explicit DirectoryTraceStore(std::string dir) : dir_(std::move(dir)) {}
  std::string PathFor(const std::string& id) const;

  const std::string dir_;
  absl::Mutex mutex_;
  InMemoryTraceStore cache_;
};

}  // namespace habitat
