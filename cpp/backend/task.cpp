#include "backend/task.h"

#include <memory>

namespace vdev::backend {

void use_intra_op_threads(int threads) {
  // What this worker last set; -1 before its first task. at::get_num_threads() would also read
  // it, but costs more than this comparison on every task.
  thread_local int applied = -1;
  if (threads == applied || threads <= 0) return;
  at::set_num_threads(threads);
  applied = threads;
}

namespace testing {

int worker_intra_op_threads(int device) {
  vdev::rt::Stream& stream = VDEV_RT(vdev::rt::current_stream(device));
  auto seen = std::make_shared<int>(-1);
  enqueue_task(stream, "worker_intra_op_threads", [seen] { *seen = at::get_num_threads(); });
  VDEV_RT(stream.synchronize());
  return *seen;
}

}  // namespace testing
}  // namespace vdev::backend
