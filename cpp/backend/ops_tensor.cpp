// Tensor creation, metadata and view kernels for vdev, plus the element kernels every backend must
// provide natively (fill_, zero_, _local_scalar_dense).
//
// View kernels reuse ATen's device-independent implementations: they only create TensorImpls that
// share the storage. Composite view ops (transpose, select, expand, ...) reach these through
// as_strided / view / _reshape_alias. Element kernels run CPU kernels on CPU aliases of the device
// bytes (backend/cpu_view.h).
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "backend/allocator.h"
#include "backend/check.h"
#include "backend/cpu_view.h"
#include "backend/guard.h"
#include "backend/task.h"
#include "backend/tensor_ops.h"

namespace vdev::backend {
namespace {

constexpr auto kVdev = c10::DeviceType::PrivateUse1;
constexpr c10::DispatchKeySet kVdevKeys(c10::DispatchKey::PrivateUse1);

void check_factory_options(c10::Device device, std::optional<c10::Layout> layout,
                           std::optional<bool> pin_memory, const char* fn) {
  TORCH_CHECK_VALUE(device.type() == kVdev, "[", fn, "] expected a vdev device, got ", device);
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
  check_factory_options(device, layout, pin_memory, "empty");
  const c10::DeviceGuard guard(device);  // validates the index; the allocator uses it
  return at::detail::empty_generic(size, device_allocator(), kVdevKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor vdev_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                              std::optional<c10::ScalarType> dtype,
                              std::optional<c10::Layout> layout,
                              std::optional<c10::Device> device_opt,
                              std::optional<bool> pin_memory) {
  const c10::Device device = c10::device_or_default(device_opt);
  check_factory_options(device, layout, pin_memory, "empty_strided");
  const c10::DeviceGuard guard(device);
  return at::detail::empty_strided_generic(size, stride, device_allocator(), kVdevKeys,
                                           c10::dtype_or_default(dtype));
}

// Sets sizes (and strides, if given) and grows the storage when the new extent needs more bytes.
void resize_impl(c10::TensorImpl* self, c10::IntArrayRef size,
                 std::optional<c10::IntArrayRef> stride) {
  if (self->sizes() == size && (!stride || self->strides() == *stride)) return;
  const std::size_t itemsize = self->dtype().itemsize();
  const std::size_t offset = static_cast<std::size_t>(self->storage_offset());
  std::size_t nbytes = 0;
  if (stride) {
    self->set_sizes_and_strides(size, *stride);
    nbytes = at::detail::computeStorageNbytes(size, *stride, itemsize, offset);
  } else {
    self->set_sizes_contiguous(size);
    nbytes = at::detail::computeStorageNbytesContiguous(size, itemsize, offset);
  }
  const c10::Storage& storage = self->unsafe_storage();
  if (nbytes > storage.nbytes()) {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), nbytes);
  }
}

at::Tensor& vdev_set_storage_(at::Tensor& result, c10::Storage storage, int64_t storage_offset,
                              c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(result, std::move(storage), storage_offset, size, stride);
  const c10::DeviceGuard guard(result.device());
  result.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  resize_impl(result.unsafeGetTensorImpl(), size,
              stride.data() != nullptr ? std::optional<c10::IntArrayRef>(stride) : std::nullopt);
  return result;
}

at::Tensor& vdev_set_source_storage_(at::Tensor& self, c10::Storage source) {
  const auto itemsize = static_cast<int64_t>(self.dtype().itemsize());
  const int64_t numel = static_cast<int64_t>(source.nbytes()) / itemsize;
  return vdev_set_storage_(self, std::move(source), 0, {numel}, {});
}

at::Tensor& vdev_set_source_tensor_(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return vdev_set_storage_(self, source.storage(), source.storage_offset(), source.sizes(),
                           source.strides());
}

at::Tensor& vdev_set_empty_(at::Tensor& self) {
  const c10::DeviceGuard guard(self.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, device_allocator(),
                       /*resizable=*/true);
  return vdev_set_storage_(self, std::move(storage), 0, {0}, {});
}

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

at::Scalar vdev_local_scalar_dense(const at::Tensor& self) {
  sync_current_stream(self.device());  // a host read of a device value waits, as on CUDA
  return at::_local_scalar_dense(cpu_alias(self));
}

// fill_ and zero_ are tasks on the current stream, writing through a CPU alias of the device bytes
// (every factory ends in one of them: torch.zeros, torch.full, ...).
at::Tensor& vdev_fill_(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  vdev::rt::Stream& stream = current_runtime_stream(self.device().index());
  enqueue_task(stream, "aten::fill_",
               [spec = AliasSpec::of(self), value] { spec.make().fill_(value); });
  return self;
}

at::Tensor& vdev_zero_(at::Tensor& self) {
  if (self.numel() == 0) return self;
  vdev::rt::Stream& stream = current_runtime_stream(self.device().index());
  enqueue_task(stream, "aten::zero_", [spec = AliasSpec::of(self)] { spec.make().zero_(); });
  return self;
}

// Tensor.record_stream: the caching allocator defers the block's reuse until the work queued on
// `s` at the time of the free has finished (backend/device_cache.h).
void vdev_record_stream(at::Tensor& self, c10::Stream s) {
  TORCH_CHECK_VALUE(s.device_type() == kVdev, "record_stream: expected a vdev stream, got one of ",
                    s.device());
  device_allocator()->recordStream(self.storage().data_ptr(), s);
}

}  // namespace

const at::Tensor& vdev_resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                               std::optional<at::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(self.device());
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  resize_impl(impl, C10_AS_INTARRAYREF_SLOW(size), std::nullopt);
  if (memory_format) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve,
                "Unsupported memory format for resize_: ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", vdev_empty);
  m.impl("empty_strided", vdev_empty_strided);
  m.impl("resize_", vdev_resize_);
  m.impl("set_.source_Storage_storage_offset", vdev_set_storage_);
  m.impl("set_.source_Storage", vdev_set_source_storage_);
  m.impl("set_.source_Tensor", vdev_set_source_tensor_);
  m.impl("set_", vdev_set_empty_);
  m.impl("as_strided", vdev_as_strided);
  m.impl("view", vdev_view);
  m.impl("_reshape_alias", vdev_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("_local_scalar_dense", vdev_local_scalar_dense);
  m.impl("fill_.Scalar", vdev_fill_);
  m.impl("zero_", vdev_zero_);
  m.impl("record_stream", vdev_record_stream);
}

}  // namespace vdev::backend
