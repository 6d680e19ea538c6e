// The vdev device allocator (a c10::DeviceAllocator registered for PrivateUse1): a caching
// allocator with CUDA's stream semantics (backend/memory/device_cache.h) in front of the runtime's
// protected device memory (runtime/memory.h).
//
// Blocks are allocated on the calling thread's *current* vdev device and for that device's current
// stream, as CUDA's allocator does: callers put a DeviceGuard on the target device first. A block
// is reused at once by later allocations on the same stream; use on another stream must be
// declared with recordStream (Tensor.record_stream), exactly as on CUDA. Queued tasks therefore
// hold no reference on device memory.
//
// Thread rules: every function is safe from any thread. Stream workers must not free device
// memory (see backend/memory/device_cache.h).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <cstddef>
#include <cstdint>

#include "backend/common/export.h"

namespace vdev::backend {

// The process-wide allocator instance (also reachable through c10::GetAllocator(PrivateUse1)).
VDEV_BACKEND_API c10::DeviceAllocator* device_allocator();

// torch.vdev.set_per_process_memory_fraction: limits what this process may reserve on `device`.
// Raises ValueError outside 0..1, IndexError for a bad device.
VDEV_BACKEND_API void set_memory_fraction(double fraction, int device);
VDEV_BACKEND_API double memory_fraction(int device);

// torch.vdev.memory.inject_oom: the device allocation after the next `after` ones raises
// torch.OutOfMemoryError, once, process-wide (every device and thread; every request the caching
// allocator serves counts, cache hits included, not zero-byte ones); `after` < 0: none. Returns
// the count it replaces (allocations still to pass; -1: none), for the caller to put back.
// VDEV_OOM_AFTER arms it when the allocator starts. Raises the configuration error if any.
VDEV_BACKEND_API std::int64_t exchange_injected_oom(std::int64_t after);

class DeviceCache;
// The caching allocator of a device (graph pools: backend/graphs/).
DeviceCache& device_cache(int device);

}  // namespace vdev::backend
