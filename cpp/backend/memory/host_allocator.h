// Pinned host memory for vdev (Tensor.pin_memory(), pin_memory=True, non_blocking copies): a
// caching host allocator (at::HostAllocator, registered for PrivateUse1).
//
// Pinned memory is what lets copies between host and device return before they have run: the
// copy task reads or writes it later. Requests are rounded up to a power of two (at least 512
// bytes) and freed blocks are cached per size for reuse; empty_cache() returns the cached blocks
// to the system. A block is never reused while queued work uses it: queued copies hold a
// reference on the blocks they use (retain_pinned_memory), and record_event(ptr, ctx, stream)
// adds a fence on the block containing ptr (the stream's enqueued count) that must complete
// before the block is reused.
// is_pinned_ptr() tells pinned from pageable memory, interior pointers included.
// Statistics follow torch.cuda.host_memory_stats: allocations / allocated_bytes (blocks obtained
// from the system), active_requests / active_bytes (blocks in use), num_host_alloc/free.
//
// Thread rules: every function is safe from any thread (one mutex).
#pragma once

#include <ATen/core/CachingHostAllocator.h>

#include <cstdint>
#include <memory>

#include "backend/common/export.h"

namespace vdev::backend {

VDEV_BACKEND_API at::HostAllocator* pinned_host_allocator();
bool is_pinned_ptr(const void* ptr);
// Keeps a pinned block from being reused until the handle is released; null for memory that is
// not a pinned block of this allocator.
std::shared_ptr<void> retain_pinned_memory(const c10::DataPtr& data_ptr);

// Registers the allocator as PrivateUse1's host allocator (from init_backend).
void register_host_allocator();

}  // namespace vdev::backend
