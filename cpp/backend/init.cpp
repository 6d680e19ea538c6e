#include "backend/init.h"

#include <mutex>

#include "backend/hooks.h"

namespace vdev::backend {

void init_backend() {
  static std::once_flag once;
  std::call_once(once, [] { register_hooks(); });
}

}  // namespace vdev::backend
