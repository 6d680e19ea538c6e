// What the allocators tell an observer about the memory they hand out: the sanitizer
// (backend/sanitizer/) installs one, so that allocator reuse and record_stream are events of its
// happens-before relation and uninitialised-read tracking, without the allocators knowing it.
//
// Thread rules: the observer is called on the allocating or freeing thread, without any allocator
// lock held (it may gather a Python stack); set_allocation_observer may be called from any thread.
// Ownership: the observer must live until the process exits (it may still be called by a thread
// that loaded it just before it was uninstalled).
#pragma once

#include <atomic>
#include <cstddef>

#include "backend/common/export.h"
#include "runtime/stream.h"

namespace vdev::backend {

class AllocationObserver {
 public:
  virtual ~AllocationObserver() = default;
  // A device block of `bytes` (as requested) handed out for use on `stream`.
  virtual void allocated(void* ptr, std::size_t bytes, vdev::rt::Stream& stream) = 0;
  // A device block about to go back to the cache (its size, its stream).
  virtual void freeing(void* ptr, std::size_t bytes, vdev::rt::Stream& stream) = 0;
  // Tensor.record_stream: `stream` uses the device block at `ptr`.
  virtual void recorded_stream(void* ptr, const vdev::rt::Stream& stream) = 0;
  // Device bytes written on the host outside any operator (a storage copy, a resize keeping its
  // old bytes).
  virtual void host_wrote(void* ptr, std::size_t bytes) = 0;
  // A pinned host block handed out again (the copies that used it have finished).
  virtual void pinned_reused(void* ptr, std::size_t bytes) = 0;
};

namespace detail {
VDEV_BACKEND_API extern std::atomic<AllocationObserver*> g_allocation_observer;
}  // namespace detail

// The installed observer, or nullptr (the allocators' one relaxed load).
inline AllocationObserver* allocation_observer() noexcept {
  return detail::g_allocation_observer.load(std::memory_order_acquire);
}
VDEV_BACKEND_API void set_allocation_observer(AllocationObserver* observer);

}  // namespace vdev::backend
