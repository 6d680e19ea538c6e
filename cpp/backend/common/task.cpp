#include "backend/common/task.h"

namespace vdev::backend {

void use_intra_op_threads(int threads) {
  // What this worker last set; -1 before its first task. at::get_num_threads() would also read
  // it, but costs more than this comparison on every task.
  thread_local int applied = -1;
  if (threads == applied || threads <= 0) return;
  at::set_num_threads(threads);
  applied = threads;
}

}  // namespace vdev::backend
