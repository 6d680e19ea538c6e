// c10::impl::DeviceGuardImplInterface for the vdev device type (PrivateUse1).
//
// Device methods forward to the runtime registry (thread-local current device); stream and event
// methods forward to the runtime's streams (runtime/stream.h) and events (runtime/event.h). A
// c10::Stream's id is the runtime stream id on its device (0 = default stream). A c10 event handle
// (void*) is a runtime Event created on first record with the flag PyTorch passes
// (BACKEND_DEFAULT = timing enabled, as on CUDA) and deleted by destroyEvent.
//
// Every method that takes a Device or Stream rejects a non-vdev one with a message naming it.
//
// Thread rules: stateless; every method is safe from any thread. One instance is registered with
// C10_REGISTER_GUARD_IMPL and lives for the process (c10 leaks it on purpose).
#pragma once

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdint>

#include "backend/export.h"
#include "runtime/stream.h"

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

// The runtime stream behind a c10::Stream of vdev (validated: device type, index, id).
vdev::rt::Stream& runtime_stream(const c10::Stream& s);
// The current runtime stream of a vdev device.
vdev::rt::Stream& current_runtime_stream(c10::DeviceIndex device);
// A c10::Stream for a runtime stream.
c10::Stream to_c10(const vdev::rt::Stream& s);
// Waits for the work queued on the current stream of `device`: operators that still run
// synchronously on the calling thread call it first, so they are ordered after queued work.
void sync_current_stream(c10::Device device);

// Elapsed milliseconds between two events given by their raw ids (torch.Event.event_id), which
// must be live vdev events. torch.Event.elapsed_time accepts only exact torch.Event arguments;
// torch.vdev.Event.elapsed_time uses this instead.
VDEV_BACKEND_API double elapsed_time_by_ids(std::uintptr_t start, std::uintptr_t end);

}  // namespace vdev::backend

#include <string>

#include "backend/export.h"

namespace vdev::backend::testing {

// Test-only: calls `method` ("setDevice", "exchangeDevice", "getStream", "getDefaultStream",
// "getDeviceCapability", "exchangeStream", "queryStream") of the guard *registered* for PrivateUse1
// with the device parsed from `device` (e.g. "cpu", "vdev:1"). Returns the resulting device index.
VDEV_BACKEND_API int guard_call(const std::string& method, const std::string& device);

}  // namespace vdev::backend::testing
