// The vdev device allocator (a c10::DeviceAllocator registered for PrivateUse1).
//
// This first allocator does not cache: every allocation is its own runtime allocation (one
// segment, one block), freed back to the runtime when the last DataPtr goes away. Its statistics
// follow torch.cuda.memory_stats' model with that simple shape (allocated == reserved == active).
// Blocks are allocated on the calling thread's *current* vdev device, as CUDA's allocator does:
// callers put a DeviceGuard on the target device first.
//
// Memory lifetime is stream-ordered without bookkeeping here: each block is reference counted, the
// DataPtr holds one reference and every queued task that uses the block holds another
// (retain_device_memory), so the block is freed (possibly on a stream worker) only once no queued
// work uses it. The caching allocator with stream-ordered reuse replaces this class (issue 5).
//
// Thread rules: every method is safe from any thread (statistics under one mutex).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StorageImpl.h>

#include <cstddef>
#include <memory>

#include "backend/export.h"

namespace vdev::backend {

// The process-wide allocator instance (also reachable through c10::GetAllocator(PrivateUse1)).
VDEV_BACKEND_API c10::DeviceAllocator* device_allocator();

// Keeps the device memory behind `data_ptr` allocated until the returned handle is released,
// independently of the Storage that owns it. Queued tasks hold these, never Storages: releasing a
// Storage can call into Python (its PyObject) and so needs the GIL, which a stream worker must
// never take. Null for an empty allocation or memory this allocator does not own.
std::shared_ptr<void> retain_device_memory(const c10::DataPtr& data_ptr);

// Grows or shrinks `storage` to `nbytes` on its own device, keeping the first min(old, new) bytes.
// Used by resize_ and by UntypedStorage.resize_ (through the hooks).
void resize_storage_bytes(c10::StorageImpl* storage, std::size_t nbytes);

}  // namespace vdev::backend
