// c10::impl::DeviceGuardImplInterface for the vdev device type (PrivateUse1).
//
// Device methods forward to the runtime registry (thread-local current device); stream methods to
// the runtime's streams (through backend/common/stream_lookup.h) and event methods to the runtime's
// events (runtime/event.h). A c10 event handle (void*) is a runtime Event created on first record
// with the flag PyTorch passes (BACKEND_DEFAULT = timing enabled, as on CUDA), tracked by
// backend/device/events.h, and deleted by destroyEvent.
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
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority) const override;
  c10::Stream getNewStream(c10::Device d, int priority) const override;
  c10::Stream exchangeStream(c10::Stream s) const override;
  void* getStreamNativeHandle(const c10::Stream s) const override;
  bool queryStream(const c10::Stream& s) const override;
  bool isStreamCapturing(const c10::Stream& s) const override;
  void synchronizeStream(const c10::Stream& s) const override;
  void synchronizeDevice(c10::DeviceIndex device_index) const override;
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& s) const override;

  void record(void** event, const c10::Stream& s, c10::DeviceIndex device_index,
              c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& s) const override;
  bool queryEvent(void* event) const override;
  void synchronizeEvent(void* event) const override;
  void destroyEvent(void* event, c10::DeviceIndex device_index) const noexcept override;
  double elapsedTime(void* event1, void* event2, c10::DeviceIndex device_index) const override;
};

}  // namespace vdev::backend
