// Pinned host memory for vdev (Tensor.pin_memory(), pin_memory=True).
//
// Pinned memory is what lets a device->host copy return before it has finished: the copy task
// writes into it later. This first allocator does not cache: each allocation is an aligned host
// allocation registered in a table, so is_pinned_ptr() can tell pinned from pageable memory
// (including interior pointers). Blocks are reference counted and queued copies retain the blocks
// they use, so a pinned block is never freed while a copy from or to it is pending.
//
// Thread rules: every function is safe from any thread.
#pragma once

#include <c10/core/Allocator.h>

#include <memory>

namespace vdev::backend {

c10::Allocator* pinned_host_allocator();
bool is_pinned_ptr(const void* ptr);
// Keeps a pinned block allocated until the handle is released (see retain_device_memory).
std::shared_ptr<void> retain_pinned_memory(const c10::DataPtr& data_ptr);

}  // namespace vdev::backend
