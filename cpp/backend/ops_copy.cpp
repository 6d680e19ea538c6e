// Copies that involve vdev tensors: aten::_copy_from and aten::_copy_from_and_resize.
//
// PyTorch's copy_ hands every copy with a PrivateUse1 side to _copy_from(src, dst). Each case runs
// a CPU copy between CPU aliases of the device bytes (backend/cpu_view.h), so dtype conversion,
// broadcasting and arbitrary strides behave exactly as on CPU, and same-dtype contiguous copies
// take one runtime memcpy. Copies are synchronous for now; non_blocking is accepted and ignored
// until copies run on streams.
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "backend/cpu_view.h"
#include "backend/tensor_ops.h"
#include "runtime/memory.h"

namespace vdev::backend {
namespace {

constexpr auto kVdev = c10::DeviceType::PrivateUse1;

bool same_bytes_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes().equals(b.sizes()) && a.is_contiguous() &&
         b.is_contiguous() && !a.is_conj() && !b.is_conj() && !a.is_neg() && !b.is_neg();
}

at::Tensor vdev_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const bool src_vdev = self.device().type() == kVdev;
  const bool dst_vdev = dst.device().type() == kVdev;
  TORCH_CHECK(src_vdev || self.device().is_cpu(), "vdev: cannot copy from ", self.device(), " to ",
              dst.device(), ": only cpu <-> vdev and vdev <-> vdev copies are supported");
  TORCH_CHECK(dst_vdev || dst.device().is_cpu(), "vdev: cannot copy from ", self.device(), " to ",
              dst.device(), ": only cpu <-> vdev and vdev <-> vdev copies are supported");
  if (dst.numel() == 0) return dst;
  const c10::DeviceGuard guard(dst_vdev ? dst.device() : self.device());

  if (same_bytes_layout(self, dst)) {
    const std::size_t n = dst.nbytes();
    if (src_vdev && dst_vdev) {
      vdev::rt::memcpy_device_to_device(dst.data_ptr(), self.data_ptr(), n);
    } else if (dst_vdev) {
      vdev::rt::memcpy_host_to_device(dst.data_ptr(), self.data_ptr(), n);
    } else {
      vdev::rt::memcpy_device_to_host(dst.data_ptr(), self.data_ptr(), n);
    }
    return dst;
  }
  at::Tensor dst_cpu = dst_vdev ? cpu_alias(dst) : dst;
  const at::Tensor src_cpu = src_vdev ? cpu_alias(self) : self;
  dst_cpu.copy_(src_cpu);
  return dst;
}

at::Tensor vdev_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  // Resize on dst's own device: the allocator works on the current device.
  if (dst.device().type() == kVdev) {
    const c10::DeviceGuard guard(dst.device());
    vdev_resize_(dst, self.sym_sizes(), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  return vdev_copy_from(self, dst, /*non_blocking=*/false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", vdev_copy_from);
  m.impl("_copy_from_and_resize", vdev_copy_from_and_resize);
}

}  // namespace vdev::backend
