// Memory history of the caching allocator (torch.vdev.memory._record_memory_history): what a
// DeviceCache records while history is on, in the types CUDA's caching allocator uses
// (c10::CachingDeviceAllocator::TraceEntry, RecordContext, CreateContextFn), and the observers
// called before an out-of-memory error is raised.
//
// A DeviceCache owns one TraceRing and records into it under its own mutex. Stacks are gathered
// before that mutex is taken, never under it: gathering Python frames takes the GIL, and a thread
// holding the GIL may be waiting for the mutex. Entries own their stacks (GatheredContext) until
// they are overwritten or cleared; destroying one under the mutex is safe because torch's
// CapturedTraceback defers releasing Python frames to a later gather instead of taking the GIL.
//
// Thread rules: a TraceRing has none of its own (its DeviceCache's mutex guards it). The observer
// list is process-wide and safe from any thread. Needs only c10 (the cache core's C++ tests build
// without libtorch).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace vdev::backend {

using c10::CachingDeviceAllocator::RecordContext;
using c10::CachingDeviceAllocator::TraceEntry;

// What to record: torch.cuda's _record_memory_history arguments, resolved.
struct HistorySettings {
  bool enabled = false;
  // Which stacks to keep: with blocks (STATE), also with alloc entries (ALLOC), also with frees
  // (ALL). Ignored while not enabled.
  RecordContext when = RecordContext::NEVER;
  // Gathers the calling thread's stack; required unless `when` is NEVER. Called without any
  // allocator lock held.
  c10::CachingDeviceAllocator::CreateContextFn gather = nullptr;
  std::size_t max_entries = 1;  // the newest entries kept (at least 1)
  bool clear = false;           // drop what was recorded before
  std::uint32_t skip = 0;       // bit (1 << TraceEntry::Action) for each action not recorded
};

// The recorded entries: the newest `max_entries`, oldest overwritten first (CUDA's ring buffer).
class TraceRing {
 public:
  // Sets how many entries are kept (the newest ones stay when it shrinks); `clear` drops them all.
  void configure(std::size_t max_entries, bool clear);
  void add(TraceEntry entry);
  // Oldest first.
  std::vector<TraceEntry> entries() const;
  void clear();

 private:
  std::vector<TraceEntry> entries_;
  std::size_t next_ = 0;  // once full, the slot the next entry overwrites (the oldest)
  std::size_t max_ = 1;
};

// A trace entry's time: microseconds since the Unix epoch (CUDA's "time_us").
std::int64_t trace_time_us();

// Called when an allocation is about to fail with an out-of-memory error, before the error is
// raised and without any allocator lock held, with CUDA's arguments: the device, the bytes
// requested, the bytes the process may use on the device (its capacity, or the share that
// set_per_process_memory_fraction allows) and the bytes the device has free. An observer may
// take a snapshot of the allocator (torch.vdev.memory._snapshot).
using OutOfMemoryObserver = std::function<void(std::int64_t device, std::size_t requested,
                                               std::size_t allowed, std::size_t device_free)>;
// Observers stay attached for the life of the process (as CUDA's).
void attach_out_of_memory_observer(OutOfMemoryObserver observer);
std::vector<OutOfMemoryObserver> out_of_memory_observers();

}  // namespace vdev::backend
