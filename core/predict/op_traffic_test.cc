#include "core/predict/op_traffic.h"

#include "gtest/gtest.h"

namespace habitat {
namespace {

void AddTensor(habitat::v1::Operation* op, std::initializer_list<int64_t> shape,
               const std::string& dtype) {
  auto* tensor = op->add_arguments()->mutable_tensor();
  for (int64_t d : shape) tensor->add_shape(d);
  tensor->set_dtype(dtype);
}

TEST(OpTrafficTest, InputsPlusAnOutputLikeTheLargestInput) {
  habitat::v1::Operation op;
  op.set_name("aten::add");
  AddTensor(&op, {64, 256, 56, 56}, "float");          // 205,520,896 B
  AddTensor(&op, {64, 256, 56, 56}, "c10::BFloat16");  // 102,760,448 B
  op.add_arguments()->set_scalar(1.0);
  EXPECT_EQ(EstimatePassDramBytes(op, false), uint64_t{205520896 * 2 + 102760448});
  EXPECT_EQ(EstimatePassDramBytes(op, true), uint64_t{(205520896 * 2 + 102760448) * 3 / 2});
}

TEST(OpTrafficTest, NothingToGoOn) {
  habitat::v1::Operation op;
  op.set_name("aten::_foreach_add_");
  op.add_arguments()->set_none(true);
  EXPECT_FALSE(EstimatePassDramBytes(op, false).has_value());
  AddTensor(&op, {8, 8}, "some::Unknown");
  EXPECT_FALSE(EstimatePassDramBytes(op, false).has_value());
}

TEST(OpTrafficTest, HostileShapesNeitherOverflowNorGoNegative) {
  habitat::v1::Operation op;
  AddTensor(&op, {-5, 7}, "float");
  EXPECT_EQ(EstimatePassDramBytes(op, false), uint64_t{0});
  AddTensor(&op, {int64_t{1} << 40, int64_t{1} << 40, int64_t{1} << 40}, "double");
  auto bytes = EstimatePassDramBytes(op, true);
  ASSERT_TRUE(bytes.has_value());
  EXPECT_GT(*bytes, uint64_t{1} << 60);
}

TEST(OpTrafficTest, DtypeSizes) {
  EXPECT_EQ(DtypeBytes("float"), 4);
  EXPECT_EQ(DtypeBytes("c10::Half"), 2);
  EXPECT_EQ(DtypeBytes("long int"), 8);
  EXPECT_EQ(DtypeBytes("bool"), 1);
  EXPECT_EQ(DtypeBytes(""), 0);
}

}  // namespace
}  // namespace habitat
