#include "runtime/arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/config.h"
#include "runtime/host_access.h"
#include "runtime/process.h"

namespace vdev::rt::arena {
namespace {

constexpr std::size_t kArenaGranularity = std::size_t{2} << 20;

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// Free ranges of one arena, best-fit by size, coalesced by offset.
class RangeSet {
 public:
  void add(std::size_t off, std::size_t len) {
    by_offset_.emplace(off, len);
    by_size_.emplace(len, off);
  }
  std::optional<std::size_t> take(std::size_t len) {
    auto it = by_size_.lower_bound({len, 0});
    if (it == by_size_.end()) return std::nullopt;
    const auto [have, off] = *it;
    by_size_.erase(it);
    by_offset_.erase(off);
    if (have > len) add(off + len, have - len);
    return off;
  }
  // Returns [off, len) and gives back the merged free range that now contains it.
  std::pair<std::size_t, std::size_t> give_back(std::size_t off, std::size_t len) {
    auto next = by_offset_.lower_bound(off);
    if (next != by_offset_.end() && next->first == off + len) {
      len += next->second;
      by_size_.erase({next->second, next->first});
      next = by_offset_.erase(next);
    }
    if (next != by_offset_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        off = prev->first;
        len += prev->second;
        by_size_.erase({prev->second, prev->first});
        by_offset_.erase(prev);
      }
    }
    add(off, len);
    return {off, len};
  }

 private:
  std::map<std::size_t, std::size_t> by_offset_;
  std::set<std::pair<std::size_t, std::size_t>> by_size_;
};

struct Arena {
  // Published once (device_base last, with release) and never changed afterwards.
  std::atomic<std::uintptr_t> device_base{0};
  std::uintptr_t kernel_base = 0;
  std::size_t size = 0;
  bool protected_view = false;

  std::mutex mu;  // guards free and creation
  RangeSet free;
};

std::array<Arena, kMaxDevices>& arenas() {
  static auto* a = [] {
    auto* made = new std::array<Arena, kMaxDevices>;  // leaked: see the header
    for (Arena& arena : *made) register_fork_lock(&arena.mu, ForkLockLevel::kArenas);
    return made;
  }();
  return *a;
}

void* map(std::size_t size, int prot) {
  void* p = mmap(nullptr, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Creates the views of `a` (under a.mu).
void create_locked(Arena& a, int device, std::size_t capacity) {
  const std::size_t size =
      round_up(capacity == 0 ? kArenaGranularity : capacity, kArenaGranularity);
  void* kernel = map(size, PROT_READ | PROT_WRITE);
  if (kernel == nullptr) {
    throw std::runtime_error("[device_malloc] cannot reserve " + std::to_string(size) +
                             " bytes of address space for vdev:" + std::to_string(device) +
                             " (VDEV_DEVICE_MEMORY too large for this machine?)");
  }
  void* device_view = map(size, PROT_NONE);
  a.protected_view = device_view != nullptr;
  if (device_view == nullptr) device_view = kernel;  // unprotected, but still correct
  a.kernel_base = reinterpret_cast<std::uintptr_t>(kernel);
  a.size = size;
  a.free.add(0, size);
  a.device_base.store(reinterpret_cast<std::uintptr_t>(device_view), std::memory_order_release);
  install_host_access_diagnostics();
}

}  // namespace

void* reserve(int device, std::size_t size, std::size_t capacity) {
  Arena& a = arenas()[static_cast<std::size_t>(device)];
  std::lock_guard<std::mutex> lock(a.mu);
  if (a.device_base.load(std::memory_order_relaxed) == 0) create_locked(a, device, capacity);
  const std::optional<std::size_t> off = a.free.take(size);
  if (!off) return nullptr;
  return reinterpret_cast<void*>(a.device_base.load(std::memory_order_relaxed) + *off);
}

void release(int device, void* ptr, std::size_t size) noexcept {
  Arena& a = arenas()[static_cast<std::size_t>(device)];
  const std::uintptr_t base = a.device_base.load(std::memory_order_acquire);
  const std::size_t off = reinterpret_cast<std::uintptr_t>(ptr) - base;
  std::lock_guard<std::mutex> lock(a.mu);
  const auto [merged_off, merged_len] = a.free.give_back(off, size);
  // Return whole pages of the merged free range (pages shared with live ranges stay).
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t first = round_up(merged_off, page);
  const std::size_t last = (merged_off + merged_len) / page * page;
  if (last > first) {
    madvise(reinterpret_cast<void*>(a.kernel_base + first), last - first, MADV_DONTNEED);
  }
}

int device_of(std::uintptr_t addr) noexcept {
  auto& all = arenas();
  for (std::size_t d = 0; d < all.size(); ++d) {
    const std::uintptr_t base = all[d].device_base.load(std::memory_order_acquire);
    if (base != 0 && addr - base < all[d].size) return static_cast<int>(d);
  }
  return -1;
}

void* to_kernel(const void* ptr) noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  auto& all = arenas();
  for (const Arena& a : all) {
    const std::uintptr_t base = a.device_base.load(std::memory_order_acquire);
    if (base != 0 && addr - base < a.size)
      return reinterpret_cast<void*>(a.kernel_base + addr - base);
  }
  return const_cast<void*>(ptr);
}

bool is_protected(int device) noexcept {
  const Arena& a = arenas()[static_cast<std::size_t>(device)];
  return a.device_base.load(std::memory_order_acquire) != 0 && a.protected_view;
}

}  // namespace vdev::rt::arena
