// Meta kernels for the aten operators that have none and that CUDA runs asynchronously: the random
// samplers binomial and _sample_dirichlet, the gradients of gamma and Dirichlet samples, and the
// fake-quantization kernels of quantization-aware training (their outputs: the input's layout,
// empty_like with MemoryFormat::Preserve, as CPU's kernels in FakeQuantPerTensorAffine.cpp and
// FakeQuantPerChannelAffine.cpp allocate them; the masks bool). Without
// a meta kernel the executor cannot plan an operator (backend/executor/launch_plan.h), so vdev ran
// these synchronously where a GPU does not wait.
//
// Each returns what CPU's kernel returns (aten/src/ATen/native/Distributions.cpp): a contiguous
// tensor of the first argument's dtype and of the arguments' broadcast shape (CPU's kernels
// allocate the first argument's shape and their TensorIterator resizes it to the broadcast shape).
// Registered for the Meta key, they also let these operators run on meta and fake tensors.
//
// Thread rules: stateless.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace vdev::backend {
namespace {

// A contiguous tensor of first's dtype and of the broadcast shape of all the arguments (raising
// TensorIterator's error when they do not broadcast).
at::Tensor like_first(const at::Tensor& first, std::initializer_list<const at::Tensor*> others) {
  std::vector<int64_t> shape = first.sizes().vec();
  for (const at::Tensor* other : others) shape = at::infer_size(shape, other->sizes());
  return at::empty(shape, first.options());
}

at::Tensor binomial_meta(const at::Tensor& count, const at::Tensor& prob,
                         std::optional<at::Generator> /*generator*/) {
  return like_first(count, {&prob});
}

at::Tensor sample_dirichlet_meta(const at::Tensor& alpha, std::optional<at::Generator> /*gen*/) {
  return like_first(alpha, {});
}

at::Tensor standard_gamma_grad_meta(const at::Tensor& self, const at::Tensor& output) {
  return like_first(self, {&output});
}

at::Tensor dirichlet_grad_meta(const at::Tensor& x, const at::Tensor& alpha,
                               const at::Tensor& total) {
  return like_first(x, {&alpha, &total});
}

at::Tensor preserved(const at::Tensor& self, std::optional<at::ScalarType> dtype = std::nullopt) {
  return at::empty_like(self, dtype ? self.options().dtype(*dtype) : self.options(),
                        at::MemoryFormat::Preserve);
}

std::tuple<at::Tensor, at::Tensor> with_mask(const at::Tensor& self) {
  return {preserved(self), preserved(self, at::kBool)};
}

std::tuple<at::Tensor, at::Tensor> fake_quantize_cachemask_meta(const at::Tensor& self, double,
                                                                int64_t, int64_t, int64_t) {
  return with_mask(self);
}

std::tuple<at::Tensor, at::Tensor> fake_quantize_cachemask_tensor_qparams_meta(
    const at::Tensor& self, const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t,
    int64_t) {
  return with_mask(self);
}

std::tuple<at::Tensor, at::Tensor> fake_quantize_per_channel_cachemask_meta(
    const at::Tensor& self, const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t) {
  return with_mask(self);
}

at::Tensor fake_quantize_learnable_per_tensor_meta(const at::Tensor& self, const at::Tensor&,
                                                   const at::Tensor&, int64_t, int64_t, double) {
  return preserved(self);
}

at::Tensor fake_quantize_learnable_per_channel_meta(const at::Tensor& self, const at::Tensor&,
                                                    const at::Tensor&, int64_t, int64_t, int64_t,
                                                    double) {
  return preserved(self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("fake_quantize_per_tensor_affine_cachemask", &fake_quantize_cachemask_meta);
  m.impl("_fake_quantize_per_tensor_affine_cachemask_tensor_qparams",
         &fake_quantize_cachemask_tensor_qparams_meta);
  m.impl("fake_quantize_per_channel_affine_cachemask", &fake_quantize_per_channel_cachemask_meta);
  m.impl("_fake_quantize_learnable_per_tensor_affine", &fake_quantize_learnable_per_tensor_meta);
  m.impl("_fake_quantize_learnable_per_channel_affine", &fake_quantize_learnable_per_channel_meta);
  m.impl("binomial", &binomial_meta);
  m.impl("_sample_dirichlet", &sample_dirichlet_meta);
  m.impl("_standard_gamma_grad", &standard_gamma_grad_meta);
  m.impl("_dirichlet_grad", &dirichlet_grad_meta);
}

}  // namespace vdev::backend
