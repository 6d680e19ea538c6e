// resize_ and set_ for vdev tensors: metadata changes whose storage grows through the vdev
// allocator on the tensor's own device (backend/memory/storage_resize.h), and Tensor.record_stream,
// the other kernel that changes what the allocator knows about a tensor's memory.
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "backend/common/vdev_device.h"
#include "backend/memory/allocator.h"
#include "backend/memory/storage_resize.h"

namespace vdev::backend {
namespace {

const at::Tensor& vdev_resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                               std::optional<at::MemoryFormat> memory_format) {
  const int64_t old_nbytes = static_cast<int64_t>(self.storage().nbytes());
  resize_vdev_tensor(self, C10_AS_INTARRAYREF_SLOW(size), memory_format);
  // As resize_cuda_: with deterministic algorithms, the grown part of the storage is filled (NaN,
  // or the largest integer) rather than left uninitialised.
  if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms() &&
                   at::globalContext().deterministicFillUninitializedMemory())) {
    at::native::fill_resize_deterministic_(self, old_nbytes);
  }
  return self;
}

at::Tensor& vdev_set_storage_(at::Tensor& result, c10::Storage storage, int64_t storage_offset,
                              c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(result, std::move(storage), storage_offset, size, stride);
  const c10::DeviceGuard guard(result.device());
  result.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  resize_tensor_impl(
      result.unsafeGetTensorImpl(), size,
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

// Tensor.record_stream: the caching allocator defers the block's reuse until the work queued on
// `s` at the time of the free has finished (backend/memory/device_cache.h).
void vdev_record_stream(at::Tensor& self, c10::Stream s) {
  TORCH_CHECK_VALUE(s.device_type() == kVdev, "record_stream: expected a vdev stream, got one of ",
                    s.device());
  device_allocator()->recordStream(self.storage().data_ptr(), s);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("resize_", vdev_resize_);
  m.impl("set_.source_Storage_storage_offset", vdev_set_storage_);
  m.impl("set_.source_Storage", vdev_set_source_storage_);
  m.impl("set_.source_Tensor", vdev_set_source_tensor_);
  m.impl("set_", vdev_set_empty_);
  m.impl("record_stream", vdev_record_stream);
}

}  // namespace vdev::backend
