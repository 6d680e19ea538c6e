// The caching allocator's bookkeeping: torch.cuda.memory_stats-style statistics
// (c10::CachingDeviceAllocator::DeviceStats) and the out-of-memory message, kept apart from the
// block logic in device_cache.cpp so that each can be read alone.
//
// Every statistic is a StatArray indexed by pool (aggregate, small pool, large pool): a change is
// applied to the aggregate and to the block's own pool.
//
// Thread rules: none of their own; DeviceCache calls them under its mutex. Needs only c10 (the
// cache core's C++ tests build without libtorch).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace vdev::backend {

// Adds `delta` (may be negative) to the aggregate entry and to the small or large pool's entry.
// Inline: an allocation and its free change thirteen of them.
inline void add_to_stat(c10::CachingAllocator::StatArray& arr, bool small, std::int64_t delta) {
  using c10::CachingAllocator::StatType;
  auto apply = [delta](c10::CachingAllocator::Stat& s) {
    if (delta >= 0) {
      s.increase(static_cast<std::size_t>(delta));
    } else {
      s.decrease(static_cast<std::size_t>(-delta));
    }
  };
  apply(arr[static_cast<std::size_t>(StatType::AGGREGATE)]);
  apply(arr[static_cast<std::size_t>(small ? StatType::SMALL_POOL : StatType::LARGE_POOL)]);
}
// The aggregate current value.
std::int64_t current_aggregate(const c10::CachingAllocator::StatArray& arr);
// torch.vdev.reset_accumulated_memory_stats / reset_peak_memory_stats on one device's stats.
void reset_accumulated(c10::CachingDeviceAllocator::DeviceStats& stats);
void reset_peaks(c10::CachingDeviceAllocator::DeviceStats& stats);

// What the out-of-memory message reports.
struct OutOfMemoryFacts {
  int device;
  std::size_t requested;  // bytes the failed allocation asked for
  std::size_t total;      // the device's capacity
  std::size_t free;       // what the device has free
  std::size_t allocated;  // allocated by PyTorch (this process)
  std::size_t reserved;   // reserved by the cache (allocated + cached)
  double fraction;        // the per-process fraction (1.0: none set)
  std::size_t allowed;    // fraction * total
};

// CUDA's out-of-memory message, with vdev's names.
std::string out_of_memory_message(const OutOfMemoryFacts& f);

}  // namespace vdev::backend
