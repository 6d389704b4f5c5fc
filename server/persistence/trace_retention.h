// Deletes traces older than a number of days: once when started (so a
// server that was down for a while does not serve expired traces), then
// periodically on a thread of its own.
#pragma once

#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/store/trace_store.h"

namespace habitat {

struct RetentionOptions {
  // Traces created more than this many days ago are deleted; must be > 0.
  int days = 0;
  absl::Duration interval = absl::Hours(1);
  Clock clock = [] { return absl::Now(); };
};

class TraceRetention {
 public:
  // Sweeps once before returning (its error is returned: the server does
  // not start), then every `interval`. `store` must outlive the result.
  static absl::StatusOr<std::unique_ptr<TraceRetention>> Start(TraceStore* store,
                                                               RetentionOptions options);
  // Stops the thread (waits for a sweep in progress).
  ~TraceRetention();
  TraceRetention(const TraceRetention&) = delete;
  TraceRetention& operator=(const TraceRetention&) = delete;

  // One sweep now; how many traces it deleted.
  absl::StatusOr<size_t> SweepOnce();
  // Completed sweeps and traces they deleted, over this object's life.
  int sweeps() const;
  size_t deleted() const;

 private:
  TraceRetention(TraceStore* store, RetentionOptions options)
      : store_(store), options_(std::move(options)) {}
  void Loop();

  TraceStore* const store_;
  const RetentionOptions options_;
  mutable absl::Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  int sweeps_ ABSL_GUARDED_BY(mutex_) = 0;
  size_t deleted_ ABSL_GUARDED_BY(mutex_) = 0;
  std::thread thread_;
};

}  // namespace habitat
