#include "backend/sanitizer/allocation_events.h"

#include "backend/sanitizer/poison.h"
#include "backend/sanitizer/settings.h"
#include "backend/sanitizer/stream_sanitizer.h"

namespace vdev::backend {
namespace {

class SanitizerAllocationEvents final : public AllocationObserver {
 public:
  void allocated(void* ptr, std::size_t bytes, vdev::rt::Stream& stream) override {
    sanitizer_allocated(ptr, bytes, stream);  // also for poison: record_stream is per allocation
    if (poisoning()) poison_block(ptr, bytes, stream);
  }
  void freeing(void* ptr, std::size_t bytes, vdev::rt::Stream& stream) override {
    // (The sanitizer tracks record_stream whatever its tools: poison needs it too.)
    const bool used_elsewhere = sanitizer_freed(ptr);
    if (poisoning() && !used_elsewhere) poison_block(ptr, bytes, stream);
  }
  void recorded_stream(void* ptr, const vdev::rt::Stream& stream) override {
    sanitizer_recorded_stream(ptr, stream);
  }
  void host_wrote(void* ptr, std::size_t bytes) override {
    if (sanitizing_init()) sanitizer_host_wrote(ptr, bytes);
  }
  void pinned_reused(void* ptr, std::size_t bytes) override {
    if (sanitizing_streams()) sanitizer_forget_range(ptr, bytes);
  }
};

}  // namespace

AllocationObserver& sanitizer_allocation_observer() {
  static auto* observer = new SanitizerAllocationEvents;  // leaked: see the header
  return *observer;
}

}  // namespace vdev::backend
