#include "runtime/fault_injection.h"

#include <array>
#include <atomic>
#include <cstddef>

namespace vdev::rt {
namespace {

struct Point {
  std::atomic<int> pending{0};              // inject_fault: operations still to fail
  std::atomic<std::int64_t> countdown{-1};  // arm_fault_after: operations still to pass; -1: none
};

std::array<Point, static_cast<std::size_t>(Fault::kCount)> g_points{};

Point& point(Fault f) { return g_points[static_cast<std::size_t>(f)]; }

}  // namespace

void inject_fault(Fault f, int count) noexcept {
  if (count > 0) point(f).pending.fetch_add(count);
}

std::int64_t arm_fault_after(Fault f, std::int64_t after) noexcept {
  return point(f).countdown.exchange(after < 0 ? -1 : after);
}

bool injected_fault_armed(Fault f) noexcept {
  const Point& p = point(f);
  return p.countdown.load(std::memory_order_relaxed) >= 0 ||
         p.pending.load(std::memory_order_relaxed) > 0;
}

bool take_injected_fault(Fault f) noexcept {
  Point& p = point(f);
  // The countdown first: each operation takes one step; the one that finds 0 fails and leaves -1.
  // Counting needs no ordering with other memory, only the atomicity of each step.
  std::int64_t c = p.countdown.load(std::memory_order_relaxed);
  while (c >= 0) {
    if (p.countdown.compare_exchange_weak(c, c - 1, std::memory_order_relaxed)) {
      if (c == 0) return true;
      break;
    }
  }
  int n = p.pending.load(std::memory_order_relaxed);
  while (n > 0) {
    if (p.pending.compare_exchange_weak(n, n - 1)) return true;
  }
  return false;
}

}  // namespace vdev::rt
