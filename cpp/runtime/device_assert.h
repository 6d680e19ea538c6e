// Sticky device-side asserts: after a kernel of a device hits a device-side assert, the device is
// unusable until the process ends, as a CUDA context is ("CUDA error: device-side assert
// triggered" from every later launch, copy and synchronize on that device; other devices keep
// working).
//
// The runtime does not know which failures are device-side asserts: the layer above installs a
// classifier (set_device_assert_classifier; the backend's, backend/common/device_asserts.h, knows
// which CPU kernel errors stand for a CUDA_KERNEL_ASSERT). A stream worker asks it when a task
// fails (runtime/stream.h): a device-side assert is kept as ErrorKind::kDeviceAssert (raised on
// the host as DeviceAssertFailure: torch.AcceleratorError) and asserts the task's device. From
// then on Stream::enqueue and Stream::synchronize on any stream of that device throw
// DeviceAssertFailure naming the first failure and the stream it ran on, after that stream's own
// pending errors (the failure itself is reported first, once, as any task error).
//
// VDEV_STICKY_ASSERTS=0 (runtime/config.h) turns this off: the failure keeps its kernel's kind and
// the device recovers, as before. clear_device_assert makes a device usable again, which CUDA
// cannot do: for test isolation (the pytest plugin between tests).
//
// Thread rules: every function is safe from any thread; device_asserted is one relaxed load.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "runtime/config.h"
#include "runtime/errors.h"
#include "runtime/export.h"

namespace vdev::rt {

// Whether a failed task's error is a device-side assert: `task` is its name, `kind` and `what`
// its exception's kind and message. Must not throw.
using DeviceAssertClassifier = bool (*)(const char* task, ErrorKind kind, const char* what);

VDEV_RT_API void set_device_assert_classifier(DeviceAssertClassifier classifier) noexcept;
VDEV_RT_API DeviceAssertClassifier device_assert_classifier() noexcept;

// Whether a failure of `task` (its exception's `kind` and `what`) is a device-side assert that
// makes its device unusable: sticky asserts on, and the classifier says so or the task declared it
// (`kind` is kDeviceAssert). For tasks that run others (a graph replay names its failing task).
VDEV_RT_API bool is_sticky_device_assert(const char* task, ErrorKind kind,
                                         const char* what) noexcept;

// For a stream worker whose task failed: whether the failure is a device-side assert (sticky
// asserts on and the classifier says so); if it is, `device` is now asserted, by `failure` (the
// message the task's error is kept with) unless it already was.
bool note_task_failure(int device, const char* task, ErrorKind kind, const char* what,
                       const std::string& failure) noexcept;

namespace detail {
// Per device: asserted (written under device_assert.cpp's lock, read lock-free).
VDEV_RT_API extern std::atomic<bool> g_device_asserted[kMaxDevices];
}  // namespace detail

// Whether a device-side assert has made `device` unusable. Inline: Stream::enqueue asks it for
// every task, and nothing is asserted almost always (one relaxed load).
inline bool device_asserted(int device) noexcept {
  return device >= 0 && device < kMaxDevices &&
         detail::g_device_asserted[device].load(std::memory_order_relaxed);
}

// Throws DeviceAssertFailure for an asserted `device`, naming its first failure and `operation`.
[[noreturn]] VDEV_RT_API void throw_device_asserted(int device, const char* operation);

// The first failure that asserted `device`; nullopt if it is usable.
VDEV_RT_API std::optional<std::string> device_assert_failure(int device);

// Makes `device` usable again (tests and the pytest plugin); the failure it had, if any.
VDEV_RT_API std::optional<std::string> clear_device_assert(int device);

}  // namespace vdev::rt
