#include "backend/memory/cache_stats.h"

#include "runtime/memory.h"

namespace vdev::backend {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

namespace {

template <typename F>
void for_each_stat(DeviceStats& s, F f) {
  for (StatArray* arr :
       {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
        &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    for (Stat& st : *arr) f(st);
  }
}

}  // namespace

std::int64_t current_aggregate(const StatArray& arr) {
  return arr[static_cast<std::size_t>(StatType::AGGREGATE)].current;
}

void reset_accumulated(DeviceStats& st) {
  for_each_stat(st, [](Stat& x) { x.reset_accumulated(); });
  st.num_alloc_retries = st.num_ooms = st.num_sync_all_streams = 0;
  st.num_device_alloc = st.num_device_free = st.num_oom_rejections = 0;
}

void reset_peaks(DeviceStats& st) {
  for_each_stat(st, [](Stat& x) { x.reset_peak(); });
}

std::string out_of_memory_message(const OutOfMemoryFacts& f) {
  using vdev::rt::format_bytes;
  std::string limit;
  if (f.fraction < 1.0) {
    limit = " This process may use at most " + format_bytes(f.allowed) +
            " (set_per_process_memory_fraction(" + std::to_string(f.fraction) + ")).";
  }
  return "vdev out of memory. Tried to allocate " + format_bytes(f.requested) +
         ". vdev:" + std::to_string(f.device) + " has a total capacity of " +
         format_bytes(f.total) + " of which " + format_bytes(f.free) +
         " is free. Of the allocated memory " + format_bytes(f.allocated) +
         " is allocated by PyTorch, and " + format_bytes(f.reserved - f.allocated) +
         " is reserved by PyTorch but unallocated." + limit +
         " Freeing tensors or torch.vdev.empty_cache() may help.";
}

}  // namespace vdev::backend
