// Resizing vdev storages and tensors: grows or shrinks device memory on the storage's own device
// (never the caller's current one) and keeps the bytes that survive.
//
// Used by aten::resize_ and set_ (backend/ops/resize.cpp), by out= operators whose output the
// executor resizes (backend/executor/), by _copy_from_and_resize, and by UntypedStorage.resize_
// (through the hooks).
//
// A storage with bytes is resized only after every stream of its device has finished with it
// (queued work may still write the bytes being preserved); an empty storage, which out= kernels
// resize all the time (`at::empty({0})` then `abs_out`), does not wait.
//
// Thread rules: like any ATen kernel, called on the dispatching thread.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>

#include <cstddef>
#include <optional>

namespace vdev::backend {

// Grows or shrinks `storage` to `nbytes` on its own device, keeping the first min(old, new) bytes.
void resize_storage_bytes(c10::StorageImpl* storage, std::size_t nbytes);

// The same, for bytes the calling thread writes next (a kernel run on the host grew an out=
// argument into host memory, which common/cpu_alias.h's carry_back copies in): it also waits for
// what the allocation queued on the device's current stream (the sanitizer's poison fill, which
// would otherwise land after the copy), and tells the allocation observer that the host writes
// the whole storage (the sanitizer's record of initialised bytes).
void resize_storage_for_host_write(c10::StorageImpl* storage, std::size_t nbytes);

// Sets sizes (and strides, if given) and grows the storage when the new extent needs more bytes.
void resize_tensor_impl(c10::TensorImpl* self, c10::IntArrayRef size,
                        std::optional<c10::IntArrayRef> stride);

// aten::resize_ for vdev tensors.
const at::Tensor& resize_vdev_tensor(const at::Tensor& self, c10::IntArrayRef size,
                                     std::optional<at::MemoryFormat> memory_format);

}  // namespace vdev::backend
