#include "backend/sanitizer/allocation_numbers.h"

#include <atomic>

namespace vdev::backend {
namespace {

std::atomic<std::uint64_t> g_next{1};

}  // namespace

std::uint64_t take_allocation_number() noexcept {
  return g_next.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t next_allocation_number() noexcept { return g_next.load(std::memory_order_relaxed); }

}  // namespace vdev::backend
