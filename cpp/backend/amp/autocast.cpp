// Autocast for vdev: the AutocastPrivateUse1 kernels, following CUDA's policy operator for
// operator.
//
// CUDA's registration (aten/src/ATen/autocast_mode.cpp, TORCH_LIBRARY_IMPL(aten, Autocast, m)) is
// built from the shared policy lists in ATen/autocast_mode.h; this file registers the same lists
// with the same policies for PrivateUse1, so the two cannot drift apart:
//   lower_precision_fp  AT_FORALL_LOWER_PRECISION_FP (matmul family, convolutions, linear,
//                       RNN cells, attention)
//   fp32                AT_FORALL_FP32 (exp/log/pow, norms, losses, upsampling, ...)
//   fp32_set_opt_dtype  AT_FORALL_FP32_SET_OPT_DTYPE (softmax, log_softmax, sum, prod, cumsum, ...)
//   fp32_append_dtype   AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE (norm)
//   promote             AT_FORALL_PROMOTE (addcmul, addcdiv, atan2, cross, dot, index_put, ...)
// plus binary_cross_entropy, banned inside autocast as on CUDA. CUDA's two other entries,
// cudnn_convolution and cudnn_convolution_transpose, are cuDNN operators that never run on vdev.
// Every other operator falls through. The default lower-precision dtype (float16, as CUDA's) and
// the weight cast cache are ATen's (at::autocast), shared by every device type.
//
// Thread rules: registration at load time only; the kernels are ATen's (autocast state is per
// thread).
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace vdev::backend {
namespace {

// The list of operators with a different redispatch signature names these types unqualified.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&,
                                       const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast.\nMany models use a sigmoid layer right before the binary cross entropy "
              "layer.\nIn this case, combine the two layers using "
              "torch.nn.functional.binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss."
              "  binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast.");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define VDEV_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define VDEV_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define VDEV_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define VDEV_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(VDEV_LOWER_PRECISION_FP)
  AT_FORALL_FP32(VDEV_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(VDEV_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(VDEV_PROMOTE)
#undef VDEV_LOWER_PRECISION_FP
#undef VDEV_FP32
#undef VDEV_FP32_SET_OPT_DTYPE
#undef VDEV_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN((&binary_cross_entropy_banned)));
}

}  // namespace vdev::backend
