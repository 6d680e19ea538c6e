#include "backend/sanitizer/switches.h"

#include <mutex>

#include "backend/sanitizer/allocation_events.h"
#include "backend/sanitizer/host_operators.h"
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
  set_allocation_observer(flags != 0 ? &sanitizer_allocation_observer() : nullptr);
  detail::g_sanitizer_flags.store(flags, std::memory_order_relaxed);
}

void enable_sanitizer_from_config() {
  if (vdev::rt::config_error()) return;  // raised by the first device use
  const unsigned flags = vdev::rt::config().sanitizer;
  if (flags != 0) set_sanitizer_flags(flags);
}

}  // namespace vdev::backend
