#include "core/testing/op_builder.h"

#include "absl/strings/str_cat.h"

namespace habitat {
namespace testing {

OpBuilder::OpBuilder(const std::string& name, std::string dtype) : dtype_(std::move(dtype)) {
  op_.set_name(name);
}

OpBuilder& OpBuilder::Tensor(const std::vector<int64_t>& shape) { return Tensor(shape, dtype_); }

OpBuilder& OpBuilder::Tensor(const std::vector<int64_t>& shape, const std::string& dtype) {
  habitat::v1::TensorArgument* t = Next()->mutable_tensor();
  t->mutable_shape()->Add(shape.begin(), shape.end());
  t->set_dtype(dtype);
  return *this;
}

OpBuilder& OpBuilder::List(const std::vector<std::vector<int64_t>>& shapes) {
  const int index = next_++;
  for (size_t j = 0; j < shapes.size(); ++j) {
    habitat::v1::Argument* a = op_.add_arguments();
    a->set_name(absl::StrCat(index, ".", j));
    a->mutable_tensor()->mutable_shape()->Add(shapes[j].begin(), shapes[j].end());
  }
  return *this;
}

OpBuilder& OpBuilder::Ints(const std::vector<int64_t>& values) {
  Next()->mutable_integers()->mutable_values()->Add(values.begin(), values.end());
  return *this;
}

OpBuilder& OpBuilder::Int(int64_t value) {
  Next()->set_integer(value);
  return *this;
}

OpBuilder& OpBuilder::Scalar(double value) {
  Next()->set_scalar(value);
  return *this;
}

OpBuilder& OpBuilder::Bool(bool value) {
  Next()->set_boolean(value);
  return *this;
}

OpBuilder& OpBuilder::Text(const std::string& value) {
  Next()->set_text(value);
  return *this;
}

OpBuilder& OpBuilder::None() {
  Next()->set_none(true);
  return *this;
}

habitat::v1::Argument* OpBuilder::Next() {
  habitat::v1::Argument* a = op_.add_arguments();
  a->set_name(absl::StrCat(next_++));
  return a;
}

kernel_varying::OpConfig OpConfigOf(
    std::initializer_list<std::pair<kernel_varying::ConfigColumn, int64_t>> values) {
  kernel_varying::OpConfig c{};
  for (const auto& [column, value] : values) c[column] = value;
  return c;
}

}  // namespace testing
}  // namespace habitat
