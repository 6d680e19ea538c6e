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
