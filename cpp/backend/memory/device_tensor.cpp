#include "backend/memory/device_tensor.h"

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>

#include "backend/memory/allocator.h"

namespace vdev::backend {
namespace {

constexpr c10::DispatchKeySet kVdevKeys(c10::DispatchKey::PrivateUse1);

at::Tensor fill_if_deterministic(at::Tensor t) {
  if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms() &&
                   at::globalContext().deterministicFillUninitializedMemory())) {
    at::native::fill_empty_deterministic_(t);
  }
  return t;
}

}  // namespace

at::Tensor new_device_tensor(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                             c10::ScalarType dtype) {
  return fill_if_deterministic(
      at::detail::empty_strided_generic(sizes, strides, device_allocator(), kVdevKeys, dtype));
}

at::Tensor new_device_tensor(c10::IntArrayRef sizes, c10::ScalarType dtype,
                             std::optional<c10::MemoryFormat> memory_format) {
  return fill_if_deterministic(
      at::detail::empty_generic(sizes, device_allocator(), kVdevKeys, dtype, memory_format));
}

}  // namespace vdev::backend
