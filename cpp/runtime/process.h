// Process-life rules of the simulated driver: fork and exit.
//
// Fork: worker threads do not survive fork(), but their mutexes and queues do. The runtime counts
// as *initialised* once it has started a stream worker or allocated device memory; a child forked
// after that point cannot use streams or device memory: check_not_forked() throws
// std::runtime_error("cannot re-initialise vdev in a forked subprocess; use the spawn start
// method"), as CUDA does. Device queries (count, current device) keep working in the child.
// Locks: every mutex the runtime and the backend own that a forking thread could find held by
// another thread is registered with register_fork_lock(); fork() takes them all in the prepare
// handler (in registration order) and releases them in the parent and the child, so the child
// never inherits a mutex locked by a thread that does not exist there.
//
// Exit, the rule (drain running, abandon queued, leak, park strays):
// - shutdown_workers() runs once, from Python's atexit (torch_vdev registers it, so it runs while
//   the interpreter is alive and after every non-daemon thread has been joined) or, for programs
//   without Python, from the C atexit handler. It sets `stopping`, lets every worker finish the
//   task it is running and waits for those tasks *without a time limit* (a kernel always ends;
//   waits inside runtime tasks — gates, event waits — return at once when stopping). It prints a
//   line every few seconds naming the tasks it still waits for. Queued tasks that have not started
//   are abandoned, never run: exit cannot hang on work that will never complete.
// - Workers never exit their thread once stopping: they park, so that no thread-local destructor
//   races with static destruction. Nothing is destroyed: the stream table and the arenas are
//   leaked on purpose (static destructors must not race with worker threads).
// - Host threads other than the exiting one (Python's daemon threads, the only ones left) that
//   enter or leave a vdev wait or queue work once stopping is set *park* there for good instead
//   of returning: a daemon thread that returned would reacquire the GIL during finalisation, and
//   Python 3.11 ends such a thread with a forced unwind that aborts the process (std::terminate)
//   through C++ frames. Parking assumes the caller released the GIL, which every blocking binding
//   does (torch's and ours).
// - The exiting thread itself (a __del__ during finalisation) gets std::runtime_error("the vdev
//   runtime is shutting down") from enqueue and from a synchronize whose work was abandoned.
//
// Thread rules: all functions are safe from any thread.
#pragma once

#include <cstddef>
#include <mutex>

#include "runtime/export.h"

namespace vdev::rt {

// Marks the runtime initialised (idempotent) and installs the fork and exit handlers.
VDEV_RT_API void mark_initialised() noexcept;
VDEV_RT_API bool in_bad_fork() noexcept;
// Throws std::runtime_error in a child forked after initialisation. `fn` names the caller.
VDEV_RT_API void check_not_forked(const char* fn);

// The order in which the fork handler takes the registered locks: a lock is taken after every
// lock that may be held while it is taken (outer levels first). Within a level, locks never nest.
enum class ForkLockLevel : unsigned char {
  kPlanCache,       // backend/executor/plan_cache.cpp (held while looking up the tables below)
  kOperatorTables,  // out= variants, convolution shapes, device rules
  kGenerators,      // the default generators' Philox states
  kAllocators,      // the device caches' table, each device cache, the pinned host allocator
  kBackendLeaves,   // worker warnings, the live-event table
  kStreamTable,     // runtime: stream creation
  kStreams,         // runtime: each stream's queue
  kMemoryTable,     // runtime: the device allocation table
  kArenas,          // runtime: each device's arena
  kIpcSlots,        // runtime: the tables of slots this process sends (runtime/ipc.h)
  kCount
};

// Registers a mutex that fork() must not copy in a locked state. `mu` must live for the rest of
// the process (a static or leaked object). Lock-free; call once per mutex.
VDEV_RT_API void register_fork_lock(std::mutex* mu, ForkLockLevel level) noexcept;

// The registered locks, in registration order: how many, and the i-th (nullptr for one still
// being registered or beyond the count). For diagnostics, such as which locks are held now.
VDEV_RT_API std::size_t registered_fork_lock_count() noexcept;
VDEV_RT_API std::mutex* registered_fork_lock(std::size_t i) noexcept;

// A new T, never destroyed (the fork handler may take its lock until the process ends), whose
// member `mu` is registered at `level`: the process-wide tables of the backend.
template <typename T>
T* new_leaked_with_fork_lock(ForkLockLevel level) {
  auto* made = new T;
  register_fork_lock(&made->mu, level);
  return made;
}

// True once process exit has begun; long waits inside runtime tasks poll it.
VDEV_RT_API bool stopping() noexcept;
// The exit rule above: sets stopping, then runs the registered shutdown steps (the stream
// registry's stops the workers, waits for the running tasks and reports unreported errors).
// Idempotent. Call with the GIL released.
VDEV_RT_API void shutdown_workers() noexcept;
// Adds a step to shutdown_workers(), run in registration order once `stopping` is set. `step`
// must not throw and must stay valid for the life of the process. Lock-free; at most
// kMaxShutdownSteps steps.
inline constexpr int kMaxShutdownSteps = 8;
void register_shutdown_step(void (*step)() noexcept) noexcept;
// Called by the stream workers when they start.
void mark_worker_thread() noexcept;
// Once stopping: never returns on a host thread other than the exiting one (see above). Returns
// at once otherwise.
VDEV_RT_API void park_if_stray_at_exit() noexcept;
// Never returns.
[[noreturn]] void park_forever() noexcept;

}  // namespace vdev::rt
