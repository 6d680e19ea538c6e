#include "backend/device/hooks.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/util/Exception.h>

#include "backend/common/error_boundary.h"
#include "backend/common/vdev_device.h"
#include "backend/memory/host_allocator.h"
#include "backend/memory/storage_resize.h"
#include "backend/random/generator.h"
#include "runtime/device.h"
#include "runtime/memory.h"

namespace vdev::backend {
namespace {

using c10::DeviceIndex;

struct VdevHooks final : public at::PrivateUse1HooksInterface {
  // Called by ATen's lazy device initialisation before the first vdev tensor is made: a malformed
  // VDEV_DEVICE_COUNT / VDEV_DEVICE_MEMORY surfaces here with its real cause.
  void init() const override { VDEV_RT(vdev::rt::device_count()); }

  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return vdev::rt::device_count_noexcept() > 0; }

  bool hasPrimaryContext(DeviceIndex device_index) const override {
    // Simulated devices need no context creation: every valid device is always ready.
    return device_index >= 0 && device_index < vdev::rt::device_count_noexcept();
  }

  DeviceIndex deviceCount() const override {
    return static_cast<DeviceIndex>(vdev::rt::device_count_noexcept());
  }
  void setCurrentDevice(DeviceIndex device) const override {
    VDEV_RT(vdev::rt::set_device(device));
  }
  DeviceIndex getCurrentDevice() const override {
    return static_cast<DeviceIndex>(vdev::rt::get_device());
  }
  DeviceIndex exchangeDevice(DeviceIndex device) const override {
    return static_cast<DeviceIndex>(VDEV_RT(vdev::rt::exchange_device(device)));
  }
  DeviceIndex maybeExchangeDevice(DeviceIndex device) const override {
    return static_cast<DeviceIndex>(VDEV_RT(vdev::rt::maybe_exchange_device(device)));
  }

  at::Device getDeviceFromPtr(void* data) const override {
    const int device = vdev::rt::pointer_device(data);
    TORCH_CHECK_VALUE(device >= 0, "[get_device_from_ptr] pointer ", data,
                      " is not inside any live vdev device allocation");
    return at::Device(kVdev, static_cast<DeviceIndex>(device));
  }

  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }

  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }

  // Per-device counter-based generators (backend/random/generator.h); -1 means the current device.
  const at::Generator& getDefaultGenerator(DeviceIndex device_index) const override {
    return default_generator(device_index);
  }

  at::Generator getNewGenerator(DeviceIndex device_index) const override {
    return new_user_generator(device_index);
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), newsize);
  }
};

}  // namespace

void register_hooks() {
  static VdevHooks* hooks = new VdevHooks;  // leaked: ATen keeps the pointer for the process
  at::RegisterPrivateUse1HooksInterface(hooks);
}

}  // namespace vdev::backend
