#include "backend/common/task.h"

#include <mutex>
#include <unordered_set>

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

}  // namespace vdev::backend
