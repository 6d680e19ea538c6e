// The caching part of the vdev device allocator: one DeviceCache per device, in the spirit of
// CUDA's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp), written for this runtime.
//
// Segments come from the runtime (vdev::rt::device_malloc) and are split into blocks. Requests are
// rounded up to 512 bytes. Requests of at most 1 MiB are served from the small pool (2 MiB
// segments), larger ones from the large pool (20 MiB segments up to 10 MiB, else the request
// rounded up to 2 MiB). A block is split when the rest is worth keeping (small pool: >= 512 bytes,
// large pool: > 1 MiB); a freed block merges with free neighbours of its segment.
//
// Stream semantics (as CUDA's): every block belongs to the stream that was current when it was
// allocated, and is only ever reused by allocations on that stream. Freeing returns it to the
// pool at once, although work queued on its stream may still use it: any later use on the same
// stream is queued after that work. Use on another stream must be declared with
// Tensor.record_stream (record_stream() here): the block's free is then deferred until the work
// queued on those streams at the time of the free has finished (a fence: the stream's enqueued
// count, compared with its completed count; no event task is queued).
//
// Graph pools (CUDA's private pools): between begin_allocate_to_pool(pool, capture) and
// end_allocate_to_pool(capture), allocations on a stream that takes part in that capture
// (Stream::capture_id) come from the private pool `pool`, whose segments serve nothing else. A
// block freed there goes back to that pool, so the addresses a graph replays into are never handed
// to other work. A pool lives while any graph uses it (use count: one per begin_allocate_to_pool,
// less one per release_pool); once unused, its segments go back to the runtime with the device's
// other free segments (empty_cache, an out-of-memory retry), those whose blocks are all free.
// Statistics count its memory.
//
// Segments go back to the runtime (and their pages to the system) only in empty_cache() and when
// an allocation fails: both first wait until no queued work of the device can use them.
// Statistics follow torch.cuda.memory_stats (c10::CachingDeviceAllocator::DeviceStats).
//
// Observation, as CUDA's allocator: while a profile records memory (c10::memoryProfilingEnabled),
// every allocation and free is reported to it (c10::reportMemoryUsageToProfiler) with the device's
// totals after the change. While memory history is on (record_history, backend/memory/
// cache_history.h), allocations, frees, segment allocations and releases and out-of-memory errors
// are recorded as CUDA's TraceEntry actions, and snapshot() describes every segment and block in
// CUDA's SegmentInfo / BlockInfo. With neither on, an allocation or free pays one relaxed load and
// one profiler check.
//
// Thread rules: every method is safe from any thread (one mutex per device). Stream workers never
// allocate or free device memory (queued tasks hold no device Storages), so waiting for the
// device's streams while holding the mutex cannot deadlock; that wait never parks a thread at
// interpreter exit (runtime/process.h) while it holds the mutex: a daemon thread in empty_cache or
// an out-of-memory retry at exit parks only after releasing it, so the exiting thread can still
// free memory. Stacks for the history are gathered before the mutex is taken (gathering takes the
// GIL), and out-of-memory observers and `reclaim` run after it is released.
// Ownership: Blocks and segments are owned by their DeviceCache; DeviceCaches live until process
// exit.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/memory/cache_history.h"
#include "runtime/stream.h"

namespace vdev::backend {

struct Block;

// Where a block lies (for tests and diagnostics).
struct BlockInfo {
  void* ptr;
  std::size_t size;
  int device;
  const vdev::rt::Stream* stream;
};

// One device's cache as torch.vdev.memory._snapshot shows it.
struct CacheSnapshot {
  std::vector<c10::CachingDeviceAllocator::SegmentInfo> segments;  // by address
  std::vector<TraceEntry> trace;                                   // oldest first
};

class DeviceCache {
 public:
  // `reclaim`, if given, is called (without the lock) when an allocation would fail even after
  // the cache was released: it may free blocks held elsewhere (through free()) and returns whether
  // it did; the allocation is then tried once more before out of memory is declared.
  explicit DeviceCache(int device, bool (*reclaim)() = nullptr);
  ~DeviceCache();
  DeviceCache(const DeviceCache&) = delete;
  DeviceCache& operator=(const DeviceCache&) = delete;

  // A block of at least `nbytes` (> 0) for use on `stream`. Throws c10::OutOfMemoryError (after
  // releasing the cache and retrying) when the device or the per-process fraction is exhausted,
  // and at once, leaving the cache as it is, when an out-of-memory error was injected for this
  // request (runtime/fault_injection.h, Fault::kDeviceAlloc: every call asks, cache hits too).
  Block* allocate(std::size_t nbytes, vdev::rt::Stream& stream);
  void free(Block* block);
  // Declares that `stream` uses `block` (Tensor.record_stream).
  void record_stream(Block* block, vdev::rt::Stream& stream);
  // Waits for the device's queued work, then returns every unused segment to the runtime.
  void empty_cache();

  using MempoolId = c10::MempoolId_t;
  void begin_allocate_to_pool(MempoolId pool, std::uint64_t capture_id);
  void end_allocate_to_pool(std::uint64_t capture_id);
  void release_pool(MempoolId pool);

  // Limits the memory this process may reserve on the device to fraction * capacity.
  void set_memory_fraction(double fraction);
  double memory_fraction();

  c10::CachingDeviceAllocator::DeviceStats stats();
  void reset_accumulated_stats();
  void reset_peak_stats();

  static BlockInfo info(const Block* block);

  // Memory history (backend/memory/cache_history.h): starts, changes or stops recording. As on
  // CUDA, stopping clears the recorded entries; blocks keep the stacks of their allocation.
  void record_history(const HistorySettings& settings);
  // Every segment with its blocks and the stacks recorded for them and, if `include_trace`, the
  // recorded history (a "snapshot" entry is recorded first while history is on).
  CacheSnapshot snapshot(bool include_trace);
  // Recorded with each trace entry: the innermost compiled region allocating (CUDA's compile
  // context, "N/A" outside one) and the user's metadata (CUDA's _set_memory_metadata).
  void push_compile_context(std::string name);
  void pop_compile_context();
  void set_user_metadata(std::string metadata);
  std::string user_metadata();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace vdev::backend
