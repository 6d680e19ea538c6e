// at::PrivateUse1HooksInterface for vdev: what ATen asks a backend about its devices (availability,
// device count, current device, which device a pointer belongs to, storage resizing).
//
// Registered once by register_hooks() (called from init_backend); registering twice aborts in
// ATen, so it must never run from a static initialiser of a library that might load twice.
//
// Thread rules: stateless; every method is safe from any thread.
#pragma once

namespace vdev::backend {

void register_hooks();

}  // namespace vdev::backend

#include <cstdint>

#include "backend/export.h"

namespace vdev::backend::testing {

// Test-only: calls through the *registered* PrivateUse1 hooks (not the class directly), so the
// tests check the registration as well as the behaviour. Errors surface as c10::Error.
VDEV_BACKEND_API int hooks_device_from_ptr(std::uintptr_t ptr);
VDEV_BACKEND_API bool hooks_has_primary_context(int device);
VDEV_BACKEND_API bool hooks_is_available();
VDEV_BACKEND_API int hooks_device_count();
VDEV_BACKEND_API int hooks_maybe_exchange_device(int device);

}  // namespace vdev::backend::testing
