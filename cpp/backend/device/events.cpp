#include "backend/device/events.h"

#include <c10/util/Exception.h>

#include <mutex>
#include <unordered_set>

#include "backend/common/error_boundary.h"
#include "runtime/process.h"

namespace vdev::backend {
namespace {

struct LiveEvents {
  std::mutex mu;
  std::unordered_set<const void*> ids;
};

LiveEvents& live_events() {
  // Leaked: events may be destroyed during teardown.
  static LiveEvents* l =
      vdev::rt::new_leaked_with_fork_lock<LiveEvents>(vdev::rt::ForkLockLevel::kBackendLeaves);
  return *l;
}

}  // namespace

vdev::rt::Event* create_event(bool enable_timing) {
  auto* event = new vdev::rt::Event(enable_timing);
  std::lock_guard<std::mutex> lock(live_events().mu);
  live_events().ids.insert(event);
  return event;
}

void destroy_event(vdev::rt::Event* event) noexcept {
  std::lock_guard<std::mutex> lock(live_events().mu);
  live_events().ids.erase(event);
  delete event;  // queued records hold their marks, not the event
}

double elapsed_time_by_ids(std::uintptr_t start, std::uintptr_t end) {
  auto* a = reinterpret_cast<vdev::rt::Event*>(start);
  auto* b = reinterpret_cast<vdev::rt::Event*>(end);
  TORCH_CHECK_VALUE(a != nullptr && b != nullptr,
                    "Both events must be recorded before calculating elapsed time.");
  std::lock_guard<std::mutex> lock(live_events().mu);  // held: neither can be destroyed meanwhile
  TORCH_CHECK_VALUE(live_events().ids.count(a) && live_events().ids.count(b),
                    "[elapsed_time] not a live vdev event");
  return VDEV_RT(a->elapsed_ms(*b));
}

}  // namespace vdev::backend
