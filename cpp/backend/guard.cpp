#include "backend/guard.h"

#include <c10/util/Exception.h>

#include "backend/check.h"
#include "runtime/device.h"

namespace vdev::backend {
namespace {

constexpr auto kVdev = c10::DeviceType::PrivateUse1;

void check_vdev(c10::Device d, const char* fn) {
  TORCH_CHECK_VALUE(d.type() == kVdev, "[", fn, "] expected a vdev device, got ", d);
}

// Resolves a vdev device to a validated index; a device without an index means the current one.
c10::DeviceIndex checked_index(c10::Device d, const char* fn) {
  check_vdev(d, fn);
  if (!d.has_index()) return static_cast<c10::DeviceIndex>(vdev::rt::get_device());
  VDEV_RT(vdev::rt::check_device_index(d.index(), fn));
  return d.index();
}

c10::Stream default_stream(c10::DeviceIndex index) {
  return c10::Stream(c10::Stream::DEFAULT, c10::Device(kVdev, index));
}

// Only the default stream exists until the stream executor lands; reject any other id rather than
// silently treating it as the default stream.
void check_stream(const c10::Stream& s, const char* fn) {
  checked_index(s.device(), fn);
  TORCH_CHECK_VALUE(s.id() == 0, "[", fn, "] unknown vdev stream id ", s.id(), " on ", s.device(),
                    ": only the default stream (id 0) exists");
}

}  // namespace

c10::DeviceType VdevGuardImpl::type() const { return kVdev; }

c10::Device VdevGuardImpl::exchangeDevice(c10::Device d) const {
  check_vdev(d, "exchange_device");
  const int prev = VDEV_RT(vdev::rt::exchange_device(d.index()));
  return c10::Device(kVdev, static_cast<c10::DeviceIndex>(prev));
}

c10::Device VdevGuardImpl::getDevice() const {
  return c10::Device(kVdev, static_cast<c10::DeviceIndex>(vdev::rt::get_device()));
}

void VdevGuardImpl::setDevice(c10::Device d) const {
  check_vdev(d, "set_device");
  VDEV_RT(vdev::rt::set_device(d.index()));
}

void VdevGuardImpl::uncheckedSetDevice(c10::Device d) const noexcept {
  if (d.type() == kVdev) vdev::rt::unchecked_set_device(d.index());
}

c10::DeviceIndex VdevGuardImpl::deviceCount() const noexcept {
  return static_cast<c10::DeviceIndex>(vdev::rt::device_count_noexcept());
}

c10::DeviceCapability VdevGuardImpl::getDeviceCapability(c10::Device d) const {
  checked_index(d, "get_device_capability");
  c10::DeviceCapability cap;  // every scalar type ...
  // ... except the quantized ones: quantized tensors use their own dispatch keys, which vdev does
  // not register.
  auto& t = cap.capability_data.supported_scalar_types;
  t.has_QInt8 = t.has_QUInt8 = t.has_QInt32 = t.has_QUInt4x2 = t.has_QUInt2x4 = 0;
  return cap;
}

c10::Stream VdevGuardImpl::getStream(c10::Device d) const {
  return default_stream(checked_index(d, "get_stream"));
}

c10::Stream VdevGuardImpl::getDefaultStream(c10::Device d) const {
  return default_stream(checked_index(d, "get_default_stream"));
}

c10::Stream VdevGuardImpl::exchangeStream(c10::Stream s) const {
  check_stream(s, "exchange_stream");
  return default_stream(s.device_index());
}

bool VdevGuardImpl::queryStream(const c10::Stream& s) const {
  check_stream(s, "query_stream");
  return true;  // all work so far ran synchronously on the caller's thread
}

void VdevGuardImpl::synchronizeStream(const c10::Stream& s) const {
  check_stream(s, "synchronize_stream");
}

void VdevGuardImpl::synchronizeDevice(c10::DeviceIndex device_index) const {
  VDEV_RT(vdev::rt::device_synchronize(device_index));
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, VdevGuardImpl);

}  // namespace vdev::backend

namespace vdev::backend::testing {

int guard_call(const std::string& method, const std::string& device) {
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  const c10::Device d(device);
  if (method == "setDevice") {
    impl->setDevice(d);
    return impl->getDevice().index();
  }
  if (method == "exchangeDevice") return impl->exchangeDevice(d).index();
  if (method == "getStream") return impl->getStream(d).device_index();
  if (method == "getDefaultStream") return impl->getDefaultStream(d).device_index();
  if (method == "getDeviceCapability") {
    impl->getDeviceCapability(d);
    return d.index();
  }
  if (method == "exchangeStream")
    return impl->exchangeStream(c10::Stream(c10::Stream::DEFAULT, d)).device_index();
  if (method == "queryStream")
    return impl->queryStream(c10::Stream(c10::Stream::DEFAULT, d)) ? 1 : 0;
  TORCH_CHECK_VALUE(false, "guard_call: unknown method ", method);
}

}  // namespace vdev::backend::testing
