// Memory for queued tasks. A task is allocated on the host thread that queues it and freed on the
// stream worker that ran it; with glibc's malloc every such block takes the allocating arena's
// lock on both threads (the worker's frees go back to the host's arena), and on a small operator
// the two threads then wait on each other in futex calls (measured: about a tenth of the host's
// time). Blocks come from here instead: the worker returns a block to a lock-free list of its size
// class, and a host thread takes back the whole list at once when its own runs out, so no lock is
// taken and no block goes back to malloc while tasks keep flowing. At most kMaxPooledBlocks per
// size class are kept; beyond that (a burst of queued tasks), blocks go back to malloc.
//
// Thread rules: take_task_block and give_task_block are safe from any thread; a block may be
// given back on another thread than the one that took it.
#pragma once

#include <cstddef>

#include "backend/common/export.h"

namespace vdev::backend {

VDEV_BACKEND_API void* take_task_block(std::size_t size);
VDEV_BACKEND_API void give_task_block(void* block, std::size_t size) noexcept;

}  // namespace vdev::backend
