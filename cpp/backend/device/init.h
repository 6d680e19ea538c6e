// Entry point of the backend library for the Python extension.
//
// init_backend() performs the registrations that must happen exactly once and must not happen in
// a static initialiser (the PrivateUse1 hooks and the pinned host allocator). The operator kernels,
// the guard and the allocator register themselves when this library is loaded; the extension module
// calls init_backend() at import, which also keeps the linker from dropping the dependency on this
// library.
//
// Thread rules: init_backend() is idempotent and safe from any thread.
#pragma once

#include "backend/common/export.h"

namespace vdev::backend {

VDEV_BACKEND_API void init_backend();

}  // namespace vdev::backend
