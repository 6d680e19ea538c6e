#include "runtime/fault_injection.h"

#include <array>
#include <atomic>
#include <cstddef>

namespace vdev::rt {
namespace {

std::array<std::atomic<int>, static_cast<std::size_t>(Fault::kCount)> g_pending{};

std::atomic<int>& pending(Fault f) { return g_pending[static_cast<std::size_t>(f)]; }

}  // namespace

void inject_fault(Fault f, int count) noexcept {
  if (count > 0) pending(f).fetch_add(count);
}

bool take_injected_fault(Fault f) noexcept {
  std::atomic<int>& p = pending(f);
  int n = p.load(std::memory_order_relaxed);
  while (n > 0) {
    if (p.compare_exchange_weak(n, n - 1)) return true;
  }
  return false;
}

}  // namespace vdev::rt
