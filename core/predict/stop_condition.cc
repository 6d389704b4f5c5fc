#include "core/predict/stop_condition.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace habitat {

const StopCondition& StopCondition::Never() {
  static const StopCondition* const never = new StopCondition();
  return *never;
}

absl::Status StopCondition::Check(absl::string_view stage, absl::string_view subject) const {
  if (cancelled_ && cancelled_()) {
    return absl::CancelledError(
        absl::StrCat("stopped ", stage, subject,
                     ": the call was cancelled (client gone or server shutting down)"));
  }
  if (deadline_ == absl::InfiniteFuture() || absl::Now() <= deadline_) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("stopped ", stage, subject, ": past ", deadline_source_));
}

bool StopCondition::IsStop(const absl::Status& status) {
  return absl::IsCancelled(status) || absl::IsDeadlineExceeded(status);
}

}  // namespace habitat
