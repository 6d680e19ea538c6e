// c10::impl::DeviceGuardImplInterface for the vdev device type (PrivateUse1).
//
// Device methods forward to the runtime registry (thread-local current device). Until the stream
// executor exists, every vdev operation runs synchronously on the calling thread, so each device
// has exactly one stream, its default stream (id 0): getStream/getDefaultStream return it,
// queryStream is truly true and synchronizeStream has nothing to wait for. Methods that would need
// more (pools, new streams, events) keep c10's "not supported" errors rather than pretending.
//
// Every method that takes a Device or Stream rejects a non-vdev one with a message naming it.
//
// Thread rules: stateless; every method is safe from any thread. One instance is registered with
// C10_REGISTER_GUARD_IMPL and lives for the process (c10 leaks it on purpose).
#pragma once

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace vdev::backend {

struct VdevGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override;
  c10::Device exchangeDevice(c10::Device d) const override;
  c10::Device getDevice() const override;
  void setDevice(c10::Device d) const override;
  void uncheckedSetDevice(c10::Device d) const noexcept override;
  c10::DeviceIndex deviceCount() const noexcept override;
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override;

  c10::Stream getStream(c10::Device d) const override;
  c10::Stream getDefaultStream(c10::Device d) const override;
  c10::Stream exchangeStream(c10::Stream s) const override;
  bool queryStream(const c10::Stream& s) const override;
  void synchronizeStream(const c10::Stream& s) const override;
  void synchronizeDevice(c10::DeviceIndex device_index) const override;
};

}  // namespace vdev::backend

#include <string>

#include "backend/export.h"

namespace vdev::backend::testing {

// Test-only: calls `method` ("setDevice", "exchangeDevice", "getStream", "getDefaultStream",
// "getDeviceCapability", "exchangeStream", "queryStream") of the guard *registered* for PrivateUse1
// with the device parsed from `device` (e.g. "cpu", "vdev:1"). Returns the resulting device index.
VDEV_BACKEND_API int guard_call(const std::string& method, const std::string& device);

}  // namespace vdev::backend::testing
