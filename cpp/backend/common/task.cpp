#include "backend/common/task.h"

#include <algorithm>
#include <mutex>
#include <unordered_set>

#include "runtime/config.h"
#include "runtime/process.h"

// This thread's OpenMP and MKL thread counts, resolved when the process loads: weak, so that a
// torch built without them (another parallel backend, another BLAS) leaves them null.
extern "C" void omp_set_num_threads(int) __attribute__((weak));
extern "C" int MKL_Set_Num_Threads_Local(int) __attribute__((weak));

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

int task_intra_op_threads() {
  // Read once: tasks are only queued on a device, which needs a valid configuration.
  static const int cap = vdev::rt::config().device_threads;
  return std::min(at::get_num_threads(), cap);
}

void use_intra_op_threads(int threads) {
  // What this worker last set; -1 before its first task. at::get_num_threads() would also read
  // it, but costs more than this comparison on every task.
  thread_local int applied = -1;
  if (threads == applied || threads <= 0) return;
  if (omp_set_num_threads == nullptr) {  // not an OpenMP build: only ATen's own setter exists
    at::set_num_threads(threads);
  } else {
    // ATen's lazy per-thread set-up runs first, so that it never overrides what is set here.
    if (applied == -1) (void)at::get_num_threads();
    omp_set_num_threads(threads);
    if (MKL_Set_Num_Threads_Local != nullptr) MKL_Set_Num_Threads_Local(threads);
  }
  applied = threads;
}

}  // namespace vdev::backend
