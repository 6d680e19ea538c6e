// What the machine's cores are doing, as far as the backend's thread policy needs to know
// (backend/common/thread_policy.h): how many stream workers are running tasks now, how many host
// threads are waiting for the device, how many CPUs the process may use, and a hook run when a
// host thread starts waiting for the device (a stream, event or device synchronize), when its own
// idle OpenMP team can be given back.
//
// Thread rules: every function is safe from any thread. busy_workers() and host_waiters() are
// relaxed counts, read as hints when a task starts.
#pragma once

#include "runtime/export.h"

namespace vdev::rt {

// The calling host thread is about to wait for the device: runs the hook, then counts it among
// host_waiters() until note_host_wait_end. Only DeviceWait calls the pair (which keeps the count
// balanced).
VDEV_RT_API void note_host_wait() noexcept;

// Called on a host thread when it starts a wait for the device (note_host_wait). Set once, when
// the backend loads; must not throw.
VDEV_RT_API void set_host_wait_hook(void (*hook)() noexcept) noexcept;

// Stream workers running a task now (the caller's included, on a worker), not counting those
// blocked in an event wait.
VDEV_RT_API int busy_workers() noexcept;

// A worker starts or ends a task (runtime/stream.cpp).
VDEV_RT_API void note_worker_busy(bool busy) noexcept;

// Host threads waiting for the device now (in a DeviceWait on a host thread, including its
// bounded spin before it sleeps). One count for the process: with several host threads, one
// waiting counts even while another runs.
VDEV_RT_API int host_waiters() noexcept;

// A host thread's wait ends (the count note_host_wait took).
VDEV_RT_API void note_host_wait_end() noexcept;

// A wait for the device, for as long as it lives: on a host thread, counts among host_waiters()
// and runs the host-wait hook (its idle OpenMP team goes back); on a stream worker (`on_worker`: an
// event wait task), the worker does not count as running a task meanwhile, and keeps its team.
class DeviceWait {
 public:
  explicit DeviceWait(bool on_worker) noexcept : on_worker_(on_worker) {
    if (on_worker_) {
      note_worker_busy(false);
    } else {
      note_host_wait();
    }
  }
  ~DeviceWait() {
    if (on_worker_) {
      note_worker_busy(true);
    } else {
      note_host_wait_end();
    }
  }
  DeviceWait(const DeviceWait&) = delete;
  DeviceWait& operator=(const DeviceWait&) = delete;

 private:
  bool on_worker_;
};

// The CPUs in this process's affinity mask when first asked (at least 1).
VDEV_RT_API int machine_cpus() noexcept;

}  // namespace vdev::rt
