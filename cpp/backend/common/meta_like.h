// Meta stand-ins of device tensors: what the executor and the operators with kernels of their own
// (convolution) run PyTorch's meta kernels on to learn an output's sizes, strides and dtype.
//
// Thread rules: stateless.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>

namespace vdev::backend {

// A meta tensor with `t`'s sizes, strides, dtype and conjugate and negative bits.
inline at::Tensor meta_like(const at::Tensor& t) {
  at::Tensor m = at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
  if (t.is_conj()) m._set_conj(true);
  if (t.is_neg()) m._set_neg(true);
  return m;
}

}  // namespace vdev::backend
