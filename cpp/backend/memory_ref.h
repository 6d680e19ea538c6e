// What a queued task holds to keep the memory it uses alive.
//
// retain_memory(t) returns a handle on the block behind tensor `t` (vdev device memory or pinned
// host memory), never on its Storage: a Storage with a Python object may need the GIL when its
// last C++ reference goes, and stream workers must never take the GIL (the host may hold it while
// it waits for the stream). Tensors that are neither (pageable host memory) must not be used by
// queued work at all: callers snapshot them into fresh tensors first.
//
// Thread rules: the handles may be released on any thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace vdev::backend {

using MemoryRefs = std::vector<std::shared_ptr<void>>;

// A handle keeping t's block allocated (null for an undefined or empty tensor). Throws for memory
// that is neither vdev nor pinned.
std::shared_ptr<void> retain_memory(const at::Tensor& t);

}  // namespace vdev::backend
