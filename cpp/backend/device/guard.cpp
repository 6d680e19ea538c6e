#include "backend/device/guard.h"

#include <c10/util/Exception.h>

#include <optional>
#include <string>

#include "backend/common/device_capability.h"
#include "backend/common/error_boundary.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/sync_debug.h"
#include "backend/common/vdev_device.h"
#include "backend/common/worker_warnings.h"
#include "backend/device/events.h"
#include "backend/memory/allocator.h"
#include "runtime/device.h"
#include "runtime/event.h"
#include "runtime/stream_registry.h"

namespace vdev::backend {
namespace {

vdev::rt::Event* as_event(void* event) { return static_cast<vdev::rt::Event*>(event); }

}  // namespace

c10::DeviceType VdevGuardImpl::type() const { return kVdev; }

c10::Device VdevGuardImpl::exchangeDevice(c10::Device d) const {
  check_vdev_device(d, "exchange_device");
  const int prev = VDEV_RT(vdev::rt::exchange_device(d.index()));
  return c10::Device(kVdev, static_cast<c10::DeviceIndex>(prev));
}

c10::Device VdevGuardImpl::getDevice() const {
  return c10::Device(kVdev, static_cast<c10::DeviceIndex>(vdev::rt::get_device()));
}

void VdevGuardImpl::setDevice(c10::Device d) const {
  check_vdev_device(d, "set_device");
  VDEV_RT(vdev::rt::set_device(d.index()));
}

void VdevGuardImpl::uncheckedSetDevice(c10::Device d) const noexcept {
  if (d.type() == kVdev) vdev::rt::unchecked_set_device(d.index());
}

c10::DeviceIndex VdevGuardImpl::deviceCount() const noexcept {
  return static_cast<c10::DeviceIndex>(vdev::rt::device_count_noexcept());
}

c10::DeviceCapability VdevGuardImpl::getDeviceCapability(c10::Device d) const {
  checked_device_index(d, "get_device_capability");
  c10::DeviceCapability cap;  // every scalar type ...
  // ... except the quantized ones: quantized tensors use their own dispatch keys, which vdev does
  // not register.
  auto& t = cap.capability_data.supported_scalar_types;
  t.has_QInt8 = t.has_QUInt8 = t.has_QInt32 = t.has_QUInt4x2 = t.has_QUInt2x4 = 0;
  // ... and except those the device's capability profile has no tensors of (VDEV_PROFILE).
  const DeviceCapability& profile = DeviceCapability::get();
#define VDEV_DROP_REFUSED(_, n) \
  if (profile.refuses(c10::ScalarType::n)) t.has_##n = 0;
  AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(VDEV_DROP_REFUSED)
#undef VDEV_DROP_REFUSED
  return cap;
}

c10::Stream VdevGuardImpl::getStream(c10::Device d) const {
  return to_c10(current_runtime_stream(checked_device_index(d, "get_stream")));
}

c10::Stream VdevGuardImpl::getDefaultStream(c10::Device d) const {
  return to_c10(VDEV_RT(vdev::rt::default_stream(checked_device_index(d, "get_default_stream"))));
}

c10::Stream VdevGuardImpl::getStreamFromGlobalPool(c10::Device d, bool isHighPriority) const {
  const auto index = checked_device_index(d, "get_stream_from_pool");
  return to_c10(VDEV_RT(vdev::rt::pool_stream(index, isHighPriority)));
}

// As CUDA's guard does, "new" streams (torch.Stream(...), torch.vdev.Stream(...)) come from the
// device's pool of the requested priority, round-robin: creating streams in a loop never runs out
// and never starts more than the pool's worker threads.
c10::Stream VdevGuardImpl::getNewStream(c10::Device d, int priority) const {
  const auto index = checked_device_index(d, "new_stream");
  return to_c10(VDEV_RT(vdev::rt::pool_stream(index, /*high_priority=*/priority < 0)));
}

c10::Stream VdevGuardImpl::exchangeStream(c10::Stream s) const {
  vdev::rt::Stream& rs = runtime_stream(s);
  return to_c10(vdev::rt::exchange_current_stream(rs));
}

void* VdevGuardImpl::getStreamNativeHandle(const c10::Stream s) const { return &runtime_stream(s); }

bool VdevGuardImpl::queryStream(const c10::Stream& s) const {
  vdev::rt::Stream& rs = runtime_stream(s);
  VDEV_RT(rs.check_not_capturing("Stream.query"));
  if (!rs.query()) return false;
  // As cudaStreamQuery reports an earlier asynchronous error, so does query(): the error stays
  // pending (synchronize() still raises it, once).
  if (auto error = rs.peek_error()) TORCH_CHECK(false, error->second);
  return true;
}

bool VdevGuardImpl::isStreamCapturing(const c10::Stream& s) const {
  return runtime_stream(s).capture_id() != 0;
}

void VdevGuardImpl::synchronizeStream(const c10::Stream& s) const {
  vdev::rt::Stream& rs = runtime_stream(s);
  VDEV_RT(rs.check_not_capturing("Stream.synchronize"));
  note_synchronizing_operation("Stream.synchronize", -1);  // as CUDAStream::synchronize
  wait_then_reraise_warnings([&] { VDEV_RT(rs.synchronize()); });
}

void VdevGuardImpl::synchronizeDevice(c10::DeviceIndex device_index) const {
  wait_then_reraise_warnings([&] { VDEV_RT(vdev::rt::synchronize_device(device_index)); });
}

void VdevGuardImpl::recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                                          const c10::Stream& s) const {
  device_allocator()->recordStream(data_ptr, s);
}

void VdevGuardImpl::record(void** event, const c10::Stream& s, c10::DeviceIndex device_index,
                           c10::EventFlag flag) const {
  vdev::rt::Stream& rs = runtime_stream(s);
  TORCH_CHECK_VALUE(device_index == -1 || device_index == s.device_index(),
                    "[record_event] event on vdev:", static_cast<int>(device_index),
                    " cannot be recorded on a stream of ", s.device());
  TORCH_CHECK_VALUE(
      flag == c10::EventFlag::PYTORCH_DEFAULT || flag == c10::EventFlag::BACKEND_DEFAULT,
      "[record_event] unsupported event flag");
  if (*event == nullptr) {
    // Created lazily, on first record, with the flag PyTorch passes: BACKEND_DEFAULT enables
    // timing (torch.Event(enable_timing=True)), PYTORCH_DEFAULT does not.
    *event = create_event(flag == c10::EventFlag::BACKEND_DEFAULT);
  }
  VDEV_RT(as_event(*event)->record(rs));
}

void VdevGuardImpl::block(void* event, const c10::Stream& s) const {
  if (event == nullptr) return;
  vdev::rt::Stream& rs = runtime_stream(s);
  VDEV_RT(as_event(event)->block(rs));
}

bool VdevGuardImpl::queryEvent(void* event) const {
  return event == nullptr || VDEV_RT(as_event(event)->query());
}

void VdevGuardImpl::synchronizeEvent(void* event) const {
  if (event == nullptr) return;
  wait_then_reraise_warnings([&] { VDEV_RT(as_event(event)->synchronize()); });
}

void VdevGuardImpl::destroyEvent(void* event, c10::DeviceIndex) const noexcept {
  if (event != nullptr) destroy_event(as_event(event));
}

double VdevGuardImpl::elapsedTime(void* event1, void* event2, c10::DeviceIndex) const {
  TORCH_CHECK_VALUE(event1 != nullptr && event2 != nullptr,
                    "Both events must be recorded before calculating elapsed time.");
  return VDEV_RT(as_event(event1)->elapsed_ms(*as_event(event2)));
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, VdevGuardImpl);

}  // namespace vdev::backend
