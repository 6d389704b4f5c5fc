// Hand-made recorded operations and kernel-varying configurations, for the
// rules and sweeps the captured fixtures do not exercise.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/kernel_varying/op_config.h"
#include "habitat/v1/trace.pb.h"

namespace habitat {
namespace testing {

// Builds an operation argument by argument, named "0", "1", ... in order as
// torch.profiler records them.
class OpBuilder {
 public:
  // Tensors are of `dtype` unless one says otherwise.
  explicit OpBuilder(const std::string& name, std::string dtype = "float");

  OpBuilder& Tensor(const std::vector<int64_t>& shape);
  OpBuilder& Tensor(const std::vector<int64_t>& shape, const std::string& dtype);
  // A TensorList: one argument per element, named "<index>.<j>"; Kineto
  // records no dtype for its elements.
  OpBuilder& List(const std::vector<std::vector<int64_t>>& shapes);
  OpBuilder& Ints(const std::vector<int64_t>& values);
  OpBuilder& Int(int64_t value);
  OpBuilder& Scalar(double value);
  OpBuilder& Bool(bool value);
  OpBuilder& Text(const std::string& value);
  OpBuilder& None();

  const habitat::v1::Operation& op() const { return op_; }

 private:
  habitat::v1::Argument* Next();

  habitat::v1::Operation op_;
  std::string dtype_;
  int next_ = 0;
};

// A configuration with the columns given and every other column 0.
kernel_varying::OpConfig OpConfigOf(
    std::initializer_list<std::pair<kernel_varying::ConfigColumn, int64_t>> values);

}  // namespace testing
}  // namespace habitat
