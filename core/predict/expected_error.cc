#include "core/predict/expected_error.h"

namespace habitat {

void ExpectedErrorMean::Add(Nanoseconds predicted_ns, double error_percent) {
  if (predicted_ns <= 0) return;
  const double ns = static_cast<double>(predicted_ns);
  weighted_ += error_percent * ns;
  total_ns_ += ns;
}

double ExpectedErrorMean::percent() const { return total_ns_ > 0 ? weighted_ / total_ns_ : 0.0; }

double IterationExpectedErrorPercent(const v1::DevicePrediction& prediction) {
  if (prediction.is_origin()) return 0.0;
  ExpectedErrorMean mean;
  for (const auto& op : prediction.operations()) {
    mean.Add(op.predicted_forward_ns(), op.expected_error_percent());
    mean.Add(op.predicted_backward_ns(), op.expected_error_percent());
  }
  return mean.percent();
}

}  // namespace habitat
