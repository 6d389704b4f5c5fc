#include "core/predict/op_traffic.h"

#include <algorithm>
#include <limits>
#include <string>

namespace habitat {

int DtypeBytes(const std::string& dtype) {
  if (dtype == "float" || dtype == "int" || dtype == "unsigned int") return 4;
  if (dtype == "c10::BFloat16" || dtype == "c10::Half" || dtype == "short int") return 2;
  if (dtype == "double" || dtype == "long int" || dtype == "c10::complex<float>") return 8;
  if (dtype == "bool" || dtype == "unsigned char" || dtype == "signed char" ||
      dtype == "c10::Float8_e4m3fn" || dtype == "c10::Float8_e5m2") {
    return 1;
  }
  return 0;
}

double TensorBytes(const habitat::v1::TensorArgument& tensor) {
  double bytes = DtypeBytes(tensor.dtype());
  for (int64_t d : tensor.shape()) bytes *= d < 0 ? 0.0 : static_cast<double>(d);
  return bytes;
}

std::optional<uint64_t> EstimatePassDramBytes(const habitat::v1::Operation& op, bool backward) {
  // Saturates instead of overflowing on hostile shapes.
  constexpr double kMax = static_cast<double>(std::numeric_limits<uint64_t>::max() / 4);
  double total = 0;
  double largest = 0;
  bool any = false;
  for (const auto& argument : op.arguments()) {
    if (!argument.has_tensor()) continue;
    if (DtypeBytes(argument.tensor().dtype()) == 0) continue;
    const double bytes = TensorBytes(argument.tensor());
    any = true;
    total += bytes;
    largest = std::max(largest, bytes);
  }
  if (!any) return std::nullopt;
  double estimate = total + largest;
  if (backward) estimate *= 1.5;
  return static_cast<uint64_t>(std::min(estimate, kMax));
}

}  // namespace habitat
