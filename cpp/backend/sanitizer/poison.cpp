#include "backend/sanitizer/poison.h"

#include <cstring>

#include "runtime/memory.h"
#include "runtime/task_trace.h"

namespace vdev::backend {

void poison_block(void* ptr, std::size_t bytes, vdev::rt::Stream& stream) {
  if (ptr == nullptr || bytes == 0 || stream.capture_id() != 0) return;
  void* kernel_view = vdev::rt::kernel_address(ptr);
  if (kernel_view == nullptr) return;
  try {
    stream.enqueue(
        "poison", [kernel_view, bytes] { std::memset(kernel_view, 0xFF, bytes); },
        vdev::rt::TaskTag{vdev::rt::TaskKind::kMemset, bytes});
  } catch (...) {  // a pending stream error or exit: that stream's next synchronize reports it;
  }  // an allocation or free never fails for the poison
}

}  // namespace vdev::backend
