#include "backend/memory/storage_resize.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "backend/common/error_boundary.h"
#include "backend/common/sync_debug.h"
#include "backend/common/vdev_device.h"
#include "backend/common/worker_warnings.h"
#include "backend/memory/allocation_observer.h"
#include "backend/memory/allocator.h"
#include "runtime/device.h"
#include "runtime/memory.h"
#include "runtime/stream_registry.h"

namespace vdev::backend {

void resize_storage_bytes(c10::StorageImpl* storage, std::size_t nbytes) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  const std::size_t old_nbytes = storage->nbytes();
  if (nbytes == old_nbytes) return;
  c10::Device device = storage->device();
  if (device.type() != kVdev) {
    device = c10::Device(kVdev, vdev::rt::get_device());
  }
  const c10::DeviceGuard guard(device);  // the allocator allocates on the current device
  const bool has_bytes = old_nbytes > 0 && storage->data() != nullptr;
  if (has_bytes) {
    // A wait CUDA does not make (its copy is queued): reported, see common/sync_debug.h.
    note_synchronizing_operation("resize_ growing a storage", device.index());
    wait_then_reraise_warnings([&] { VDEV_RT(vdev::rt::synchronize_device(device.index())); });
  }
  c10::Allocator* alloc = storage->allocator() ? storage->allocator() : device_allocator();
  c10::DataPtr fresh = alloc->allocate(nbytes);
  const std::size_t keep = std::min(old_nbytes, nbytes);
  if (keep > 0 && has_bytes) {
    vdev::rt::memcpy_device_to_device(fresh.get(), storage->data(), keep);
    if (AllocationObserver* o = allocation_observer()) o->host_wrote(fresh.get(), keep);
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}

void resize_storage_for_host_write(c10::StorageImpl* storage, std::size_t nbytes) {
  resize_storage_bytes(storage, nbytes);
  if (nbytes == 0 || storage->data() == nullptr) return;
  const c10::DeviceIndex index = storage->device().index();
  wait_then_reraise_warnings([&] {
    VDEV_RT(vdev::rt::current_stream(index).synchronize());  // the caller reported its wait
  });
  if (AllocationObserver* o = allocation_observer()) o->host_wrote(storage->mutable_data(), nbytes);
}

void resize_tensor_impl(c10::TensorImpl* self, c10::IntArrayRef size,
                        std::optional<c10::IntArrayRef> stride) {
  if (self->sizes() == size && (!stride || self->strides() == *stride)) return;
  const std::size_t itemsize = self->dtype().itemsize();
  const std::size_t offset = static_cast<std::size_t>(self->storage_offset());
  const std::size_t nbytes =
      stride ? at::detail::computeStorageNbytes(size, *stride, itemsize, offset)
             : at::detail::computeStorageNbytesContiguous(size, itemsize, offset);
  // The storage grows first: growing waits for the device (and can raise a queued task's error, a
  // sync debug refusal or an out-of-memory error), and a failure must leave the tensor as it was.
  // (CPU and CUDA set the sizes first; their grow fails only when out of memory, and then leaves
  // the tensor with sizes its storage does not hold.)
  const c10::Storage& storage = self->unsafe_storage();
  if (nbytes > storage.nbytes()) {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), nbytes);
  }
  if (stride) {
    self->set_sizes_and_strides(size, *stride);
  } else {
    self->set_sizes_contiguous(size);
  }
}

const at::Tensor& resize_vdev_tensor(const at::Tensor& self, c10::IntArrayRef size,
                                     std::optional<at::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(self.device());
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  resize_tensor_impl(impl, size, std::nullopt);
  if (memory_format) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve,
                "Unsupported memory format for resize_: ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

}  // namespace vdev::backend
