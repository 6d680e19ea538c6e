#include "backend/common/stream_lookup.h"

#include <c10/util/Exception.h>

#include "backend/common/error_boundary.h"
#include "backend/common/vdev_device.h"
#include "backend/common/worker_warnings.h"
#include "runtime/device.h"
#include "runtime/event.h"

namespace vdev::backend {

c10::DeviceIndex checked_device_index(c10::Device d, const char* fn) {
  check_vdev_device(d, fn);
  if (!d.has_index()) return static_cast<c10::DeviceIndex>(vdev::rt::get_device());
  VDEV_RT(vdev::rt::check_device_index(d.index(), fn));
  return d.index();
}

vdev::rt::Stream& runtime_stream(const c10::Stream& s) {
  const c10::DeviceIndex index = checked_device_index(s.device(), "stream");
  return VDEV_RT(vdev::rt::stream_from_id(index, s.id()));
}

vdev::rt::Stream& current_runtime_stream(c10::DeviceIndex device) {
  return VDEV_RT(vdev::rt::current_stream(device));
}

c10::Stream to_c10(const vdev::rt::Stream& s) {
  return c10::Stream(c10::Stream::UNSAFE,
                     c10::Device(kVdev, static_cast<c10::DeviceIndex>(s.device())),
                     static_cast<c10::StreamId>(s.id()));
}

void order_after(vdev::rt::Stream& waiter, vdev::rt::Stream& first) {
  vdev::rt::Event mark(false);  // queued tasks hold the mark, not the event
  VDEV_RT(mark.record(first));
  VDEV_RT(mark.block(waiter));
}

void sync_current_stream(c10::Device device) {
  vdev::rt::Stream& stream = current_runtime_stream(checked_device_index(device, "synchronize"));
  wait_then_reraise_warnings([&] { VDEV_RT(stream.synchronize()); });
}

}  // namespace vdev::backend
