// The vdev device type, and the one check that a c10::Device names it.
//
// vdev is PyTorch's PrivateUse1 device type (renamed "vdev" by torch_vdev._registration);
// every backend file names it kVdev.
//
// Thread rules: stateless.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>

#include "backend/common/export.h"

namespace vdev::backend {

inline constexpr c10::DeviceType kVdev = c10::DeviceType::PrivateUse1;

// ValueError "[fn] expected a vdev device, got <d>" unless `d` is a vdev device (with or without an
// index). `fn` names the caller, as every message of the device API does.
VDEV_BACKEND_API void check_vdev_device(c10::Device d, const char* fn);

}  // namespace vdev::backend
