#include "core/trace/op_classification.h"

#include "gtest/gtest.h"

namespace habitat {
namespace {

TEST(OpClassificationTest, MatrixAndConvolutionOpsVaryByArchitecture) {
  for (const char* name :
       {"aten::conv2d", "aten::linear", "aten::addmm", "aten::bmm", "aten::matmul", "aten::lstm",
        "aten::scaled_dot_product_attention", "aten::conv_transpose2d", "aten::_cudnn_rnn"}) {
    EXPECT_EQ(ClassifyOperation(name), OpKind::kKernelVarying) << name;
  }
}

TEST(OpClassificationTest, ElementwiseAndNormalisationOpsAreKernelAlike) {
  for (const char* name :
       {"aten::relu", "aten::add_", "aten::batch_norm", "aten::softmax", "aten::layer_norm",
        "aten::max_pool2d", "aten::dropout", "aten::_foreach_add_", "aten::mmx"}) {
    EXPECT_EQ(ClassifyOperation(name), OpKind::kKernelAlike) << name;
  }
}

TEST(OpClassificationTest, BackwardNodesFollowTheirForward) {
  EXPECT_EQ(ClassifyOperation("ConvolutionBackward0"), OpKind::kKernelVarying);
  EXPECT_EQ(ClassifyOperation("autograd::engine::evaluate_function: AddmmBackward0"),
            OpKind::kKernelVarying);
  EXPECT_EQ(ClassifyOperation("ReluBackward0"), OpKind::kKernelAlike);
  EXPECT_EQ(ClassifyOperation("NativeBatchNormBackward0"), OpKind::kKernelAlike);
}

// An operation is kernel-varying by its name or by its backward's node.
TEST(OpClassificationTest, OperationsByNameOrBackwardNode) {
  v1::Operation op;
  op.set_name("aten::linear");
  EXPECT_TRUE(IsKernelVaryingOperation(op));
  op.set_name("custom::fused");
  EXPECT_FALSE(IsKernelVaryingOperation(op));
  op.mutable_backward()->set_recorded_name("AddmmBackward0");
  EXPECT_TRUE(IsKernelVaryingOperation(op));
  op.mutable_backward()->set_recorded_name("ReluBackward0");
  EXPECT_FALSE(IsKernelVaryingOperation(op));
}

}  // namespace
}  // namespace habitat
