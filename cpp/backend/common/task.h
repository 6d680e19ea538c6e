// Queueing backend work on a stream: the one place that decides what a task inherits from the host.
//
// A task runs on a stream worker, never on the thread that queued it, and must not depend on that
// worker's thread-local state: the host decides what to run, the worker runs exactly that.
// queue_launch() therefore wraps every backend task so that it
//   - runs below autograd and ADInplaceOrView (the host already did the autograd work), whatever
//     the host's grad mode, inference mode or autocast state was;
//   - keeps the warnings its kernel raises, for the host to re-raise (common/worker_warnings.h);
//   - runs its kernel with the intra-op threads the thread policy gives it
//     (backend/common/thread_policy.h: every core for a large kernel, one less for a small one
//     unless a host thread waits for the device when it starts, at most the queueing thread's
//     torch.set_num_threads; VDEV_DEVICE_THREADS fixes it). ATen's
//     OpenMP/MKL thread counts are per thread, and a worker started before set_num_threads would
//     otherwise keep the default and oversubscribe the cores when several streams run at once.
//
// Thread rules: queue_launch is called on the dispatching thread; the wrapped task runs on the
// stream's worker. The callable must be copyable (the runtime stores std::function, and a
// captured graph's instantiation copies its tasks).
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "backend/common/error_boundary.h"
#include "backend/common/export.h"
#include "backend/common/launch.h"
#include "backend/common/task_blocks.h"
#include "backend/common/thread_policy.h"
#include "backend/common/worker_warnings.h"
#include "runtime/memory.h"
#include "runtime/stream.h"

namespace vdev::backend {

// A copy of `name` that lives until the process exits, for a task's name: an operator's schema
// (where its name lives) is freed when a torch.library operator is deregistered, possibly while
// a task of it is still queued. One copy per distinct name; thread-safe.
VDEV_BACKEND_API const char* intern_task_name(const std::string& name);

namespace detail {
// One queued task and what it inherits from the host: the callable of the runtime's
// std::function, in the one block that std::function allocates for it, which comes from the task
// blocks (backend/common/task_blocks.h: allocated on the host, freed on the worker, without
// malloc's arena lock). The callable is built in place here and moved once, into that block.
template <typename F>
struct QueuedTask {
  static void* operator new(std::size_t size) { return take_task_block(size); }
  static void operator delete(void* block, std::size_t size) noexcept {
    give_task_block(block, size);
  }

  template <typename... Args>
  QueuedTask(TaskThreads threads, const char* name, int device, std::int64_t id, Args&&... args)
      : fn(std::forward<Args>(args)...), threads(threads), name(name), device(device), id(id) {}

  void operator()() {
    use_intra_op_threads(task_threads_now(threads));
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    const CaptureWorkerWarnings warnings(name, device, id);  // re-raised on the host
    try {
      fn();
    } catch (const c10::Error&) {
      rethrow_as_runtime_error();  // the host raises the same Python type
    }
  }

  F fn;
  TaskThreads threads;
  const char* name;
  int device;
  std::int64_t id;
};
}  // namespace detail

// Queues a task of type F made from `args` (F(args...), built in place) as the work `launch`
// describes: its profiler tag and thread limits come from the launch (launch.h), and the launch
// observers see it first. A task may run more than once (a captured graph's replays): running it
// must not change it. It must hold no tensor that Python may also hold: its last reference would
// be dropped on the stream worker, which then takes the GIL to release the Python object, while a
// host thread may hold the GIL waiting for that worker (a hang: copy such tensors).
template <typename F, typename... Args>
void emplace_launch(const Launch& launch, Args&&... args) {
  const vdev::rt::TaskTag tag = task_tag(launch);
  const TaskThreads threads = task_intra_op_threads(tag);
  if (const detail::LaunchObservers* observers = launch_observers(); C10_UNLIKELY(observers)) {
    observe_launch(*observers, launch, tag, threads);
  }
  // A team for the worker: the host's idle one must not tip libgomp's count (thread_policy.h).
  if (threads.host_running > 1 && tag.elements >= kLargeTaskElements) release_host_team();
  vdev::rt::Stream& stream = launch.stream;
  VDEV_RT(stream.enqueue(launch.name,
                         detail::QueuedTask<F>(threads, launch.name, stream.device(), stream.id(),
                                               std::forward<Args>(args)...),
                         tag));
}

// Queues a runtime memcpy of launch.bytes from `src` to `dst` (device addresses on the device
// side) as the work `launch` describes (kind, bytes, host side); `keep_alive` lives until it ran.
VDEV_BACKEND_API void queue_copy(const Launch& launch, void* dst, const void* src,
                                 vdev::rt::CopyKind kind,
                                 std::shared_ptr<void> keep_alive = nullptr);

// Queues the callable `fn` as the work `launch` describes.
template <typename F>
void queue_launch(const Launch& launch, F&& fn) {
  emplace_launch<std::decay_t<F>>(launch, std::forward<F>(fn));
}

}  // namespace vdev::backend
