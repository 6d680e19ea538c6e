// Symbol export for libtorch_vdev (the backend). Built with hidden visibility; only declarations
// marked VDEV_BACKEND_API are visible to the bindings and to the test-only library
// (backend/testing/).
#pragma once

#define VDEV_BACKEND_API __attribute__((visibility("default")))
