// Process-life rules of the simulated driver: fork and exit.
//
// Fork: worker threads do not survive fork(), but their mutexes and queues do. The runtime counts
// as *initialised* once it has started a stream worker or allocated device memory; a child forked
// after that point cannot use streams or device memory: check_not_forked() throws
// std::runtime_error("cannot re-initialise vdev in a forked subprocess; use the spawn start
// method"), as CUDA does. Device queries (count, current device) keep working in the child.
//
// Exit: initialisation (the first worker start or device allocation) registers an atexit handler
// that stops every worker: each finishes the task it is running (waits inside runtime tasks —
// gates, event waits — return at once) and exits without running what is still queued. Queued work
// is abandoned, never joined, so exit cannot hang on work that will never complete. Nothing is
// destroyed: the stream table and the arenas are leaked on purpose (static destructors must not
// race with worker threads).
//
// Thread rules: all functions are safe from any thread.
#pragma once

#include <chrono>

#include "runtime/export.h"

namespace vdev::rt {

// Marks the runtime initialised (idempotent) and installs the fork handler.
VDEV_RT_API void mark_initialised() noexcept;
VDEV_RT_API bool in_bad_fork() noexcept;
// Throws std::runtime_error in a child forked after initialisation. `fn` names the caller.
VDEV_RT_API void check_not_forked(const char* fn);

// True once process exit has begun; long waits inside runtime tasks poll it.
VDEV_RT_API bool stopping() noexcept;
// Sets stopping and waits (bounded by `limit`) for running tasks to finish. Idempotent; called
// from the atexit handler.
VDEV_RT_API void shutdown_workers(std::chrono::milliseconds limit) noexcept;

}  // namespace vdev::rt
