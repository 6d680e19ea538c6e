// scaled_dot_product_attention's kernel choice for vdev tensors.
//
// ATen's scaled_dot_product_attention (CompositeImplicitAutograd, aten/src/ATen/native/
// transformers/attention.cpp) asks _fused_sdp_choice_stub for the tensors' device type and takes
// the math path (a dozen operators forward, more backward) when the stub has no kernel for it.
// vdev gives the stub CPU's choice: the fused kernel it names for a query vdev can run,
// _scaled_dot_product_flash_attention_for_cpu and its backward, runs on vdev as every CPU
// operator does (queued by the executor, on aliases of the device bytes). Fake vdev tensors take
// the same choice, so torch.compile keeps the fused operator (an extern kernel) as it does on CPU
// instead of tracing the math path: compiled and eager agree.
//
// With dropout the math path stays: the fused CPU kernel would draw from the CPU generator,
// not the device's (the math path's dropout is vdev's native_dropout, keyed by the device
// generator, ops/dropout.cpp).
//
// Thread rules: the choice reads only the tensors' metadata and the global SDPA switches
// (torch.backends.cuda.enable_*_sdp), on the calling thread; no task is queued.
#include <ATen/core/Tensor.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <ATen/ops/_fused_sdp_choice_native.h>

#include <optional>

namespace vdev::backend {
namespace {

int64_t vdev_fused_sdp_choice(const at::Tensor& query, const at::Tensor& key,
                              const at::Tensor& value, const std::optional<at::Tensor>& attn_mask,
                              double dropout_p, bool is_causal, std::optional<double> scale,
                              bool enable_gqa) {
  if (dropout_p > 0.0) return static_cast<int64_t>(sdp::SDPBackend::math);
  return at::native::_fused_sdp_choice_cpp(query, key, value, attn_mask, dropout_p, is_causal,
                                           scale, enable_gqa);
}

}  // namespace
}  // namespace vdev::backend

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &vdev::backend::vdev_fused_sdp_choice)
}  // namespace at::native
