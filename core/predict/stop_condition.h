// When long work must give up: past a deadline, or once a probe says the
// caller has gone (the client cancelled, the server's shutdown grace ran
// out). The prediction engine checks it between GPUs and between batches
// of operations, so a call stops soon after its deadline instead of
// finishing work nobody will read.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace habitat {

class StopCondition {
 public:
  // Never stops.
  StopCondition() = default;
  // `deadline_source` says where the deadline came from, for the error
  // message ("the client's deadline"). `cancelled` may be empty.
  StopCondition(absl::Time deadline, std::string deadline_source,
                std::function<bool()> cancelled = nullptr)
      : deadline_(deadline),
        deadline_source_(std::move(deadline_source)),
        cancelled_(std::move(cancelled)) {}

  // One that never stops, for callers that pass none.
  static const StopCondition& Never();

  // OK, DEADLINE_EXCEEDED or CANCELLED, naming the stage work stopped at
  // (`stage` followed by `subject`, joined only when it stops: checks are
  // frequent and nearly always pass).
  absl::Status Check(absl::string_view stage, absl::string_view subject = "") const;

  // Whether `status` is what Check returns when work must stop.
  static bool IsStop(const absl::Status& status);

 private:
  absl::Time deadline_ = absl::InfiniteFuture();
  std::string deadline_source_ = "the request deadline";
  std::function<bool()> cancelled_;
};

// How many operations the engine predicts between two checks: a check costs
// a clock read (and the probe), an operation about a microsecond.
inline constexpr int kOperationsPerStopCheck = 1024;

}  // namespace habitat
