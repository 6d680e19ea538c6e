// The synchronization debug mode: torch.vdev.set_sync_debug_mode, as torch.cuda's.
//
// Every place where vdev makes the host wait for queued work that the caller did not ask to wait
// for (a blocking copy between host and device, .item(), an operator that still runs on the
// calling thread, a storage growing under resize_, Stream.synchronize) calls
// note_synchronizing_operation() before it waits. In mode 1 that warns through Python's warnings,
// in mode 2 it raises, before anything waits or runs, so nothing queued is lost. As on CUDA,
// torch.vdev.synchronize() and Event.synchronize() are explicit requests and never warn. It also
// makes the simulator's own synchronizations (an operator CUDA would queue but vdev runs on the
// host) visible: the message names the operation.
//
// Thread rules: the mode is one process-wide atomic, read lock-free; any thread may set or read it.
#pragma once

#include <c10/core/Device.h>

#include "backend/common/export.h"

namespace vdev::backend {

enum class SyncDebugMode : int { kDisabled = 0, kWarn = 1, kError = 2 };

// RuntimeError (as torch.cuda's) for a value outside 0..2.
VDEV_BACKEND_API void set_sync_debug_mode(int mode);
VDEV_BACKEND_API int sync_debug_mode();

// `operation` names what synchronizes ("aten::nonzero", "Stream.synchronize", ...); `device` is
// the device whose current stream it waits for (-1: none in particular). During a graph capture
// it first fails, naming the operation and invalidating the capture (runtime/capture.h), when
// that stream captures, or when the capture's mode forbids such "unsafe" waits.
void note_synchronizing_operation(const char* operation, c10::DeviceIndex device);
// That capture check alone, for a wait the sync debug mode does not report.
void check_capture_allows_host_wait(const char* operation, c10::DeviceIndex device);

// While one lives on a thread, note_synchronizing_operation() is silent there: an operator that
// runs on the host was noted once, and its own copies to and from the host are part of it.
class QuietSynchronizations {
 public:
  QuietSynchronizations();
  ~QuietSynchronizations();
  QuietSynchronizations(const QuietSynchronizations&) = delete;
  QuietSynchronizations& operator=(const QuietSynchronizations&) = delete;
};

}  // namespace vdev::backend
