#include "backend/common/cpu_view.h"

#include <ATen/ops/from_blob.h>

#include "runtime/memory.h"

namespace vdev::backend {
namespace {

// A non-owning CPU tensor over `data` with t's sizes, strides and lazy conj/neg bits.
at::Tensor host_view_of(void* data, const at::Tensor& t) {
  at::Tensor alias = at::from_blob(data, t.sizes(), t.strides(), t.options().device(c10::kCPU));
  // Lazy conjugation and negation are metadata: the alias must read the same values.
  if (t.is_conj()) alias._set_conj(true);
  if (t.is_neg()) alias._set_neg(true);
  return alias;
}

}  // namespace

at::Tensor cpu_alias(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "cpu_alias expects a vdev tensor, got one on ", t.device());
  // data_ptr() is pointer arithmetic on the device address (storage base + offset): it does not
  // touch device memory. kernel_address() translates the interior address as a whole.
  return host_view_of(vdev::rt::kernel_address(t.data_ptr()), t);
}

AliasSpec AliasSpec::of(const at::TensorBase& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "AliasSpec expects a vdev tensor, got one on ", t.device());
  AliasSpec s;
  s.data = vdev::rt::kernel_address(t.data_ptr());
  s.sizes.assign(t.sizes().begin(), t.sizes().end());
  s.strides.assign(t.strides().begin(), t.strides().end());
  s.dtype = t.scalar_type();
  s.conj = t.is_conj();
  s.neg = t.is_neg();
  return s;
}

at::Tensor AliasSpec::make() const {
  at::Tensor alias = at::from_blob(data, sizes, strides, at::TensorOptions().dtype(dtype));
  if (conj) alias._set_conj(true);
  if (neg) alias._set_neg(true);
  return alias;
}

at::Tensor host_view(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu(), "host_view expects a CPU tensor, got one on ", t.device());
  return host_view_of(t.data_ptr(), t);
}

}  // namespace vdev::backend
