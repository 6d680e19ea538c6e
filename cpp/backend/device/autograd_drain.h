// drain_autograd_device_threads: called at exit (torch_vdev._C._drain_autograd_device_threads,
// from python/torch_vdev/_registration.py) so that autograd's vdev device threads have finished
// with the last backward before Python finalizes.
//
// torch 2.13's `_engine_run_backward` stashes a Python object (a contextvars context) in the
// thread-local state every GraphTask copies. A device thread drops its reference to the GraphTask
// just after waking the thread that called backward; when that reference is the last, releasing
// the Python object needs the GIL, and a script that ends right after a backward races that
// release against interpreter finalization ("terminate called without an active exception",
// about 1 run in 4 of a five-line script). One more backward per device, made of C++ tensors (no
// Python object anywhere in its GraphTask), is queued behind that release on the same device
// thread, so when it returns the release has happened. Its graph is a view of an empty tensor: no
// device memory, nothing queued on any stream (a stream's pending error stays for the exit report;
// a blocked stream cannot block the exit).
//
// Thread rules: call without the GIL held (the device thread may need it for the earlier
// release); from any thread.
#pragma once

#include "backend/common/export.h"

namespace vdev::backend {

VDEV_BACKEND_API void drain_autograd_device_threads();

}  // namespace vdev::backend
