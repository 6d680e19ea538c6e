#include "backend/cpu_view.h"

#include <ATen/ops/from_blob.h>

#include "runtime/memory.h"

namespace vdev::backend {

at::Tensor cpu_alias(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "cpu_alias expects a vdev tensor, got one on ", t.device());
  // data_ptr() is pointer arithmetic on the device address (storage base + offset): it does not
  // touch device memory. kernel_address() translates the interior address as a whole.
  void* data = vdev::rt::kernel_address(t.data_ptr());
  return at::from_blob(data, t.sizes(), t.strides(), t.options().device(c10::kCPU));
}

}  // namespace vdev::backend
