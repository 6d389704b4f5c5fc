#include "core/predict/stop_condition.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace habitat {

absl::Status StopCondition::Check(absl::string_view stage) const {
  if (cancelled_ && cancelled_()) {
    return absl::CancelledError(
        absl::StrCat("stopped ", stage, ": the call was cancelled (client gone or server "
                     "shutting down)"));
  }
  if (deadline_ == absl::InfiniteFuture() || absl::Now() <= deadline_) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("stopped ", stage, ": past ", deadline_source_));
}

}  // namespace habitat
