// What a queued task holds to keep the memory it uses alive.
//
// Device memory needs nothing: the caching allocator orders reuse by streams (a freed block is
// reused only by later work on its own stream, or once the streams declared with record_stream
// have finished; backend/device_cache.h), as CUDA's does. Pinned host memory is reference counted:
// retain_memory(t) returns a handle on its block so that a pinned block is not reused while a
// queued copy still reads or writes it. Never a Storage: a Storage with a Python object may need
// the GIL when its last C++ reference goes, and stream workers must never take the GIL (the host
// may hold it while it waits for the stream). Pageable host memory must not be used by queued
// work at all: callers snapshot it into fresh tensors first.
//
// Thread rules: the handles may be released on any thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace vdev::backend {

using MemoryRefs = std::vector<std::shared_ptr<void>>;

// A handle keeping t's pinned block allocated; null for vdev memory and undefined or empty
// tensors. Throws for memory that is neither vdev nor pinned.
std::shared_ptr<void> retain_memory(const at::Tensor& t);

}  // namespace vdev::backend
