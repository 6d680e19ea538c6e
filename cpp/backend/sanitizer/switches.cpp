#include "backend/sanitizer/switches.h"

#include <cstdlib>
#include <mutex>

#include "backend/sanitizer/allocation_events.h"
#include "backend/sanitizer/composite_scopes.h"
#include "backend/sanitizer/host_operators.h"
#include "backend/sanitizer/launch_checks.h"
#include "backend/sanitizer/settings.h"
#include "backend/sanitizer/stream_sanitizer.h"
#include "runtime/happens_before.h"

namespace vdev::backend {

void set_sanitizer_flags(unsigned flags) {
  static std::mutex mu;  // one change at a time
  std::lock_guard<std::mutex> lock(mu);
  const unsigned before = sanitizer_flags();
  const unsigned tools = vdev::rt::kSanitizeStreams | vdev::rt::kSanitizeInit;
  if ((flags & tools) != (before & tools)) {
    // Records made under other tools would be half the story: start afresh.
    detail::g_sanitizer_flags.store(0, std::memory_order_relaxed);
    forget_sanitizer_state();
  }
  vdev::rt::hb::set_tracking((flags & vdev::rt::kSanitizeStreams) != 0);
  watch_host_operators((flags & vdev::rt::kSanitizeStreams) != 0);
  watch_composites((flags & vdev::rt::kSanitizeInit) != 0);
  set_allocation_observer(flags != 0 ? &sanitizer_allocation_observer() : nullptr);
  if ((flags & tools) != 0) {
    add_launch_observer(&sanitizer_launch_observer());
  } else {
    remove_launch_observer(&sanitizer_launch_observer());
  }
  detail::g_sanitizer_flags.store(flags, std::memory_order_relaxed);
}

void enable_sanitizer_from_config() {
  // Only VDEV_SANITIZER, not the whole configuration: the rest is read at the first device use,
  // so VDEV_DEVICE_COUNT and VDEV_DEVICE_MEMORY set after `import torch` (the pytest plugin's
  // --vdev-devices, --vdev-memory) still count. A bad value is left for config() to raise.
  const char* text = std::getenv("VDEV_SANITIZER");
  if (text == nullptr) return;
  unsigned flags = 0;
  try {
    flags = vdev::rt::parse_sanitizer_flags(text, "VDEV_SANITIZER");
  } catch (const std::exception&) {
    return;  // raised by the first device use
  }
  if (flags != 0) set_sanitizer_flags(flags);
}

}  // namespace vdev::backend
