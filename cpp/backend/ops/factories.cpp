// Tensor creation for vdev: empty and empty_strided allocate through the vdev caching allocator on
// the requested device, unless the device's capability profile has no such dtype
// (checks/capability_rules.h); fill_ and zero_, which every other factory ends in (torch.zeros,
// torch.full, ...), are tasks on the current stream writing through a CPU alias of the device
// bytes (backend/common/cpu_alias.h); fill_ checks its value on the host first.
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>

#include "backend/checks/capability_rules.h"
#include "backend/common/cpu_alias.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/common/vdev_device.h"
#include "backend/memory/device_tensor.h"

namespace vdev::backend {
namespace {

constexpr c10::DispatchKeySet kVdevKeys(c10::DispatchKey::PrivateUse1);

void check_factory_options(c10::Device device, c10::ScalarType dtype,
                           std::optional<c10::Layout> layout, std::optional<bool> pin_memory,
                           const char* fn) {
  check_vdev_device(device, fn);
  refuse_dtype_the_profile_lacks(dtype);  // VDEV_PROFILE=mps: no float64, as empty_mps
  TORCH_CHECK_NOT_IMPLEMENTED(c10::layout_or_default(layout) == c10::Layout::Strided, "[", fn,
                              "] vdev supports only the strided layout, got ", *layout);
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "[", fn,
              "] only CPU tensors can be pinned; pin_memory=True is invalid for a vdev tensor");
}

at::Tensor vdev_empty(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                      std::optional<c10::Layout> layout, std::optional<c10::Device> device_opt,
                      std::optional<bool> pin_memory,
                      std::optional<c10::MemoryFormat> memory_format) {
  const c10::Device device = c10::device_or_default(device_opt);
  const c10::ScalarType scalar_type = c10::dtype_or_default(dtype);
  check_factory_options(device, scalar_type, layout, pin_memory, "empty");
  const c10::DeviceGuard guard(device);  // validates the index; the allocator uses it
  return new_device_tensor(size, scalar_type, memory_format);
}

at::Tensor vdev_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                              std::optional<c10::ScalarType> dtype,
                              std::optional<c10::Layout> layout,
                              std::optional<c10::Device> device_opt,
                              std::optional<bool> pin_memory) {
  const c10::Device device = c10::device_or_default(device_opt);
  const c10::ScalarType scalar_type = c10::dtype_or_default(dtype);
  check_factory_options(device, scalar_type, layout, pin_memory, "empty_strided");
  const c10::DeviceGuard guard(device);
  return new_device_tensor(size, stride, scalar_type);
}

// CPU's checks of fill_ (the dtype is one its kernel fills; the value converts to it without
// overflow: torch.full((3,), 300, dtype=torch.uint8)) at the call, as CUDA's: CPU's fill_ on a
// stand-in (checks/stand_in_check.h). For the reduced floating types CPU's one-element path
// converts values differently from its kernel for more (which goes through float), so their
// stand-in has as many elements as self, up to 2, over a stack buffer; the other dtypes convert
// alike and use a one-element stand-in kept per thread (cheaper: no TensorIterator).
void check_fill_like_cpu(const at::Tensor& self, const at::Scalar& value) {
  const at::ScalarType dtype = self.scalar_type();
  if (at::isReducedFloatingType(dtype) || dtype == at::kComplexHalf) {
    alignas(16) unsigned char bytes[32];  // two elements of any of them
    at::Tensor s = at::from_blob(bytes, {std::min<int64_t>(self.numel(), 2)},
                                 at::TensorOptions().dtype(dtype));
    at::native::fill_(s, value);  // raises CPU's error
    return;
  }
  // Thread-local destructors run before static ones (the CPU allocator) at exit.
  thread_local std::array<at::Tensor, static_cast<std::size_t>(at::ScalarType::NumOptions)> kept;
  at::Tensor& s = kept[static_cast<std::size_t>(dtype)];
  if (!s.defined()) s = at::empty({1}, at::TensorOptions().dtype(dtype));
  at::native::fill_(s, value);  // raises CPU's error
}

at::Tensor& vdev_fill_(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  check_fill_like_cpu(self, value);
  queue_launch({.stream = current_runtime_stream(self.device().index()),
                .name = "aten::fill_",
                .kind = vdev::rt::TaskKind::kMemset,
                .uses = {{self, Access::kWrite}},
                .bytes = self.nbytes()},
               [spec = AliasSpec::of(self), value] { spec.make().fill_(value); });
  return self;
}

at::Tensor& vdev_zero_(at::Tensor& self) {
  if (self.numel() == 0) return self;
  queue_launch({.stream = current_runtime_stream(self.device().index()),
                .name = "aten::zero_",
                .kind = vdev::rt::TaskKind::kMemset,
                .uses = {{self, Access::kWrite}},
                .bytes = self.nbytes()},
               [spec = AliasSpec::of(self)] { spec.make().zero_(); });
  return self;
}

}  // namespace

// A ZeroTensor: no memory, and the ZeroTensor dispatch key, by which arithmetic skips it. Autograd
// formulas make one for a missing tangent or gradient (`(self_t - other_t * result) / other` with
// no other_t). CPU's and CUDA's kernels make it for their device; through the boxed fallback vdev
// made real zeros instead, so a NaN primal turned the term into NaN where CPU and CUDA skip it.
at::Tensor vdev_efficientzerotensor(c10::SymIntArrayRef size, std::optional<c10::ScalarType> dtype,
                                    std::optional<c10::Layout> layout,
                                    std::optional<c10::Device> device_opt,
                                    std::optional<bool> pin_memory) {
  c10::Device device = c10::device_or_default(device_opt);
  check_factory_options(device, c10::dtype_or_default(dtype), layout, pin_memory,
                        "_efficientzerotensor");
  const c10::DeviceGuard guard(device);
  if (!device.has_index()) device = guard.current_device();
  at::native::ZeroTensorAllocator allocator(device);
  const c10::DispatchKeySet keys = kVdevKeys | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(C10_AS_INTARRAYREF_SLOW(size), &allocator, keys,
                                   c10::dtype_or_default(dtype), std::nullopt);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_efficientzerotensor", vdev_efficientzerotensor);
  m.impl("empty.memory_format", vdev_empty);
  m.impl("empty_strided", vdev_empty_strided);
  m.impl("fill_.Scalar", vdev_fill_);
  m.impl("zero_", vdev_zero_);
}

}  // namespace vdev::backend
