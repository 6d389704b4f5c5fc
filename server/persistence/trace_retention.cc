#include "server/persistence/trace_retention.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace habitat {

absl::StatusOr<std::unique_ptr<TraceRetention>> TraceRetention::Start(TraceStore* store,
                                                                      RetentionOptions options) {
  if (options.days < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace retention needs at least 1 day (got ", options.days, ")"));
  }
  if (options.interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the trace retention interval must be positive");
  }
  std::unique_ptr<TraceRetention> retention(new TraceRetention(store, std::move(options)));
  auto first = retention->SweepOnce();
  if (!first.ok()) {
    return absl::Status(first.status().code(),
                        absl::StrCat("trace retention at start-up: ", first.status().message()));
  }
  retention->thread_ = std::thread([r = retention.get()] { r->Loop(); });
  return retention;
}

TraceRetention::~TraceRetention() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<size_t> TraceRetention::SweepOnce() {
  const absl::Time cutoff = options_.clock() - absl::Hours(24) * options_.days;
  HABITAT_ASSIGN_OR_RETURN(size_t deleted, store_->DeleteOlderThan(cutoff));
  if (deleted > 0) {
    std::fprintf(stderr, "trace retention: deleted %zu trace(s) stored before %s from %s\n",
                 deleted, absl::FormatTime(cutoff, absl::UTCTimeZone()).c_str(),
                 store_->Describe().c_str());
  }
  absl::MutexLock lock(&mutex_);
  ++sweeps_;
  deleted_ += deleted;
  return deleted;
}

void TraceRetention::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mutex_);
      // Wakes early only to stop.
      mutex_.AwaitWithTimeout(absl::Condition(&stopping_), options_.interval);
      if (stopping_) return;
    }
    auto swept = SweepOnce();
    if (!swept.ok()) {
      // The store may be down for a while: try again next interval.
      std::fprintf(stderr, "trace retention: sweep failed, retrying in %s: %s\n",
                   absl::FormatDuration(options_.interval).c_str(),
                   std::string(swept.status().message()).c_str());
    }
  }
}

int TraceRetention::sweeps() const {
  absl::MutexLock lock(&mutex_);
  return sweeps_;
}

size_t TraceRetention::deleted() const {
  absl::MutexLock lock(&mutex_);
  return deleted_;
}

}  // namespace habitat
