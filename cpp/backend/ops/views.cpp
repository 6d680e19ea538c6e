// View kernels for vdev. They reuse ATen's device-independent implementations, which only create
// TensorImpls that share the storage; composite view ops (transpose, select, expand, ...) reach
// these through as_strided, view and _reshape_alias. No device memory is touched.
#include <ATen/core/Tensor.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

namespace vdev::backend {
namespace {

at::Tensor vdev_as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                           std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor vdev_view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor vdev_reshape_alias(const at::Tensor& self, c10::IntArrayRef size,
                              c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("as_strided", vdev_as_strided);
  m.impl("view", vdev_view);
  m.impl("_reshape_alias", vdev_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
}

}  // namespace vdev::backend
