#include "backend/device/init.h"

#include <mutex>

#include "backend/common/device_asserts.h"
#include "backend/device/hooks.h"
#include "backend/memory/host_allocator.h"
#include "backend/sanitizer/switches.h"

namespace vdev::backend {

void init_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_hooks();
    register_host_allocator();
    enable_sanitizer_from_config();
    install_device_assert_classifier();
  });
}

}  // namespace vdev::backend
