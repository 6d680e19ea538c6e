#include "backend/common/sync_debug.h"

#include <c10/util/Exception.h>

#include <atomic>

#include "backend/common/error_boundary.h"
#include "runtime/capture.h"
#include "runtime/stream_registry.h"

namespace vdev::backend {
namespace {

std::atomic<SyncDebugMode>& mode_flag() {
  static std::atomic<SyncDebugMode> mode{SyncDebugMode::kDisabled};
  return mode;
}

thread_local int quiet_depth = 0;

}  // namespace

QuietSynchronizations::QuietSynchronizations() { ++quiet_depth; }
QuietSynchronizations::~QuietSynchronizations() { --quiet_depth; }

void set_sync_debug_mode(int mode) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "invalid value of debug_mode ", mode,
              ", expected one of 0 (default), 1 (warn), 2 (error)");
  mode_flag().store(static_cast<SyncDebugMode>(mode), std::memory_order_relaxed);
}

int sync_debug_mode() { return static_cast<int>(mode_flag().load(std::memory_order_relaxed)); }

void check_capture_allows_host_wait(const char* operation, c10::DeviceIndex device) {
  if (C10_LIKELY(vdev::rt::active_captures() == 0)) return;
  if (device >= 0) VDEV_RT(vdev::rt::current_stream(device).check_not_capturing(operation));
  VDEV_RT(vdev::rt::check_capture_permits(operation));
}

void note_synchronizing_operation(const char* operation, c10::DeviceIndex device) {
  check_capture_allows_host_wait(operation, device);
  const SyncDebugMode mode = mode_flag().load(std::memory_order_relaxed);
  if (C10_LIKELY(mode == SyncDebugMode::kDisabled) || quiet_depth > 0) return;
  // CUDA's message (c10/cuda/CUDAFunctions.cpp, warn_or_error_on_sync), naming the operation.
  if (mode == SyncDebugMode::kError) {
    TORCH_CHECK(false, "called a synchronizing vdev operation: ", operation);
  }
  TORCH_WARN("called a synchronizing vdev operation: ", operation);
}

}  // namespace vdev::backend
