#include "backend/common/task.h"

#include <mutex>
#include <unordered_set>
#include <utility>

#include "runtime/process.h"

namespace vdev::backend {

const char* intern_task_name(const std::string& name) {
  struct Names {
    std::mutex mu;
    std::unordered_set<std::string> all;  // node-based: element addresses never move
  };
  // Leaked: queued tasks and kept errors point into it until exit.
  static Names* names =
      vdev::rt::new_leaked_with_fork_lock<Names>(vdev::rt::ForkLockLevel::kBackendLeaves);
  std::lock_guard<std::mutex> lock(names->mu);
  return names->all.insert(name).first->c_str();
}

void queue_copy(const Launch& launch, void* dst, const void* src, vdev::rt::CopyKind kind,
                std::shared_ptr<void> keep_alive) {
  if (const detail::LaunchObservers* observers = launch_observers(); C10_UNLIKELY(observers)) {
    observe_launch(*observers, launch, task_tag(launch), TaskThreads{1, 1});  // one memcpy
  }
  VDEV_RT(vdev::rt::memcpy_async(launch.stream, dst, src, launch.bytes, kind, std::move(keep_alive),
                                 launch.host));
}

}  // namespace vdev::backend
