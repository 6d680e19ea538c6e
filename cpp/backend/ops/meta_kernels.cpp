// Meta kernels for the aten operators that have none and that CUDA runs asynchronously: the random
// samplers binomial and _sample_dirichlet and the gradients of gamma and Dirichlet samples. Without
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
#include <torch/library.h>

#include <optional>

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

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("binomial", &binomial_meta);
  m.impl("_sample_dirichlet", &sample_dirichlet_meta);
  m.impl("_standard_gamma_grad", &standard_gamma_grad_meta);
  m.impl("_dirichlet_grad", &dirichlet_grad_meta);
}

}  // namespace vdev::backend
