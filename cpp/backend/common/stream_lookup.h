// From c10's stream and device values to the runtime's streams (runtime/stream.h).
//
// A c10::Stream of vdev is (device index, stream id); its id is the runtime stream id on that
// device (0 = default stream). Every function validates what it is given (device type, index,
// id) and reports a bad value as a Python-mappable c10 error naming it.
//
// Thread rules: stateless; safe from any thread. The runtime streams returned live for the
// process (runtime/stream.h), so the references never dangle.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include "backend/common/export.h"
#include "runtime/stream_registry.h"

namespace vdev::backend {

// The index of a vdev device; a device without an index means the calling thread's current one.
// ValueError for another device type, IndexError for an index out of range. `fn` names the caller.
c10::DeviceIndex checked_device_index(c10::Device d, const char* fn);

// The runtime stream behind a c10::Stream of vdev.
vdev::rt::Stream& runtime_stream(const c10::Stream& s);
// The calling thread's current runtime stream of a vdev device.
VDEV_BACKEND_API vdev::rt::Stream& current_runtime_stream(c10::DeviceIndex device);
// A c10::Stream for a runtime stream.
c10::Stream to_c10(const vdev::rt::Stream& s);
// Makes `waiter` wait for the work queued on `first` so far (an event recorded on `first`,
// blocked on by `waiter`); the host does not wait.
void order_after(vdev::rt::Stream& waiter, vdev::rt::Stream& first);
// Waits for the work queued on the current stream of `device`: operators that still run
// synchronously on the calling thread call it first, so they are ordered after queued work.
// Callers report the wait first (note_synchronizing_operation, common/sync_debug.h).
void sync_current_stream(c10::Device device);

}  // namespace vdev::backend
