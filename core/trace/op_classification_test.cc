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

// Kernel names as CUPTI reports them in an H200 fp16 trace (timm, torch
// 2.11, cuDNN 9.19): layout transforms and ATen's elementwise, copy and
// reduction kernels are auxiliary; GEMMs and convolutions, ATen's
// depthwise ones included, are not.
TEST(OpClassificationTest, AuxiliaryKernelsAreTheOnesThatDoNoArithmetic) {
  for (const char* name : {
           "void cudnn::engines_precompiled::nchwToNhwcKernel<__half, __half, float, false, "
           "true, (cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, "
           "__half const*, __half*)",
           "void cudnn::engines_precompiled::nhwcToNchwKernel<__half, __half, float, true, false, "
           "(cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nhwc2nchw_params_t<float>, "
           "__half const*, __half*)",
           "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
           "at::native::CUDAFunctor_add<c10::Half> >",
           "void at::native::vectorized_elementwise_kernel<8, "
           "at::native::float16_copy_kernel_cuda(at::TensorIteratorBase&)",
           "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda",
           "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::Half, "
           "at::native::func_wrapper_t<float, at::native::sum_functor",
           "void tensorTransformGeneric<__half, __half, float, true, false, false, "
           "(cudnnKernelDataType_t)0>",
       }) {
    EXPECT_TRUE(IsAuxiliaryKernel(name)) << name;
  }
  for (const char* name : {
           "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_"
           "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
           "void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<3, c10::Half, "
           "int>",
           "nvjet_sm90_hsh_192x192_64x4_1x2_h_bz_coopB_bias_TNN",
           "void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_f16_256x128_64x3_nn_align2>",
           "void implicit_convolve_sgemm<__half, __half, 1024, 5, 5, 3, 3, 3, 1, false, false, "
           "true>",
       }) {
    EXPECT_FALSE(IsAuxiliaryKernel(name)) << name;
  }
}

// Their share of a pass counts kernels and memory activities, by duration.
TEST(OpClassificationTest, AuxiliaryShareOfAPass) {
  v1::Pass pass;
  EXPECT_EQ(AuxiliaryKernelShare(pass), 0.0);
  auto* gemm = pass.add_kernels();
  gemm->set_name("nvjet_sm90_hsh_192x192_64x4_1x2_h_bz_coopB_bias_TNN");
  gemm->set_duration_ns(600);
  auto* transform = pass.add_kernels();
  transform->set_name("void cudnn::engines_precompiled::nhwcToNchwKernel<__half>");
  transform->set_duration_ns(300);
  pass.add_memory()->set_duration_ns(100);
  EXPECT_DOUBLE_EQ(AuxiliaryKernelShare(pass), 0.3);
}

}  // namespace
}  // namespace habitat
