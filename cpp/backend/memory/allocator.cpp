#include "backend/memory/allocator.h"

#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "backend/common/error_boundary.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/sync_debug.h"
#include "backend/common/vdev_device.h"
#include "backend/memory/allocation_observer.h"
#include "backend/memory/device_cache.h"
#include "backend/memory/ipc_sharing.h"
#include "runtime/capture.h"
#include "runtime/config.h"
#include "runtime/device.h"
#include "runtime/fault_injection.h"
#include "runtime/memory.h"
#include "runtime/process.h"
#include "runtime/stream_registry.h"

namespace vdev::backend {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;

// One cache per device, created on first use, never destroyed (tensors may be freed during
// interpreter teardown, after static destructors).
class Caches {
 public:
  DeviceCache& of(int device) {
    DeviceCache* c = caches_[static_cast<std::size_t>(device)].load(std::memory_order_acquire);
    if (c != nullptr) return *c;
    std::lock_guard<std::mutex> lock(mu_);
    c = caches_[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
    if (c == nullptr) {
      // Blocks shared with other processes and released there wait for a collection before the
      // cache reports out of memory (as CUDA's allocator collects its IPC limbo).
      c = new DeviceCache(device, &collect_shared);
      caches_[static_cast<std::size_t>(device)].store(c, std::memory_order_release);
    }
    return *c;
  }
  void register_for_fork() {
    vdev::rt::register_fork_lock(&mu_, vdev::rt::ForkLockLevel::kAllocators);
  }
  // The caches created so far.
  std::vector<DeviceCache*> existing() {
    std::vector<DeviceCache*> out;
    for (auto& c : caches_) {
      if (DeviceCache* p = c.load(std::memory_order_acquire)) out.push_back(p);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::array<std::atomic<DeviceCache*>, vdev::rt::kMaxDevices> caches_{};
};

Caches& caches() {
  static Caches* c = [] {
    auto* made = new Caches;  // leaked: see above
    made->register_for_fork();
    // VDEV_OOM_AFTER counts from here: every allocation comes through this table. (A malformed
    // configuration arms nothing; every use of a device raises its error.)
    if (!vdev::rt::config_error() && vdev::rt::config().oom_after >= 0) {
      vdev::rt::arm_fault_after(vdev::rt::Fault::kDeviceAlloc, vdev::rt::config().oom_after);
    }
    return made;
  }();
  return *c;
}

}  // namespace

DeviceCache& device_cache(int device) { return caches().of(device); }

namespace {

void free_block(void* ctx) {
  auto* block = static_cast<Block*>(ctx);
  if (AllocationObserver* o = allocation_observer()) {  // before the block goes back
    const BlockInfo info = DeviceCache::info(block);
    o->freeing(info.ptr, info.size, const_cast<vdev::rt::Stream&>(*info.stream));
  }
  caches().of(DeviceCache::info(block).device).free(block);
}

class VdevAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(std::size_t nbytes) override {
    const int device = vdev::rt::get_device();
    const c10::Device dev(kVdev, static_cast<c10::DeviceIndex>(device));
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &free_block, dev);
    VDEV_RT(vdev::rt::check_not_forked("device_malloc"));
    vdev::rt::Stream& stream = VDEV_RT(vdev::rt::current_stream(device));
    Block* block = caches().of(device).allocate(nbytes, stream);
    if (AllocationObserver* o = allocation_observer()) {
      o->allocated(DeviceCache::info(block).ptr, nbytes, stream);
    }
    return c10::DataPtr(DeviceCache::info(block).ptr, block, &free_block, dev);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    const int device = vdev::rt::pointer_device(src);  // queued work may still write src
    if (device >= 0) {
      note_synchronizing_operation("storage copy", static_cast<c10::DeviceIndex>(device));
      sync_current_stream(c10::Device(kVdev, static_cast<c10::DeviceIndex>(device)));
    }
    vdev::rt::memcpy_device_to_device(dest, src, count);
    if (AllocationObserver* o = allocation_observer()) o->host_wrote(dest, count);
  }

  bool initialized() override { return true; }

  void emptyCache(c10::MempoolId_t) override {
    // Releasing memory waits for the device: "potentially unsafe" during a graph capture.
    VDEV_RT(vdev::rt::check_capture_permits("empty_cache"));
    for (DeviceCache* c : caches().existing()) c->empty_cache();
  }

  void recordStream(const c10::DataPtr& shared_or_not, c10::Stream stream) override {
    const c10::DataPtr* inner = &shared_or_not;  // a storage sent to another process is wrapped
    while (const c10::DataPtr* wrapped = unwrap_shared(*inner)) inner = wrapped;
    const c10::DataPtr& data_ptr = *inner;
    if (data_ptr.get_deleter() != &free_block || data_ptr.get_context() == nullptr) return;
    auto* block = static_cast<Block*>(data_ptr.get_context());
    if (AllocationObserver* o = allocation_observer()) {
      o->recorded_stream(DeviceCache::info(block).ptr, runtime_stream(stream));
    }
    caches().of(DeviceCache::info(block).device).record_stream(block, runtime_stream(stream));
  }

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    VDEV_RT(vdev::rt::check_device_index(device, "memory_stats"));
    return caches().of(device).stats();
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    VDEV_RT(vdev::rt::check_device_index(device, "reset_accumulated_memory_stats"));
    caches().of(device).reset_accumulated_stats();
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    VDEV_RT(vdev::rt::check_device_index(device, "reset_peak_memory_stats"));
    caches().of(device).reset_peak_stats();
  }

  std::pair<std::size_t, std::size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return VDEV_RT(vdev::rt::mem_get_info(device));
  }
};

}  // namespace

c10::DeviceAllocator* device_allocator() {
  // Leaked on purpose: tensors may be freed during interpreter teardown, after static destructors.
  static VdevAllocator* instance = new VdevAllocator;
  return instance;
}

void set_memory_fraction(double fraction, int device) {
  VDEV_RT(vdev::rt::check_device_index(device, "set_per_process_memory_fraction"));
  TORCH_CHECK_VALUE(fraction >= 0.0 && fraction <= 1.0, "Invalid fraction value: ", fraction,
                    ". Allowed range: 0~1");
  caches().of(device).set_memory_fraction(fraction);
}

double memory_fraction(int device) {
  VDEV_RT(vdev::rt::check_device_index(device, "get_per_process_memory_fraction"));
  return caches().of(device).memory_fraction();
}

namespace detail {
std::atomic<AllocationObserver*> g_allocation_observer{nullptr};
}  // namespace detail

void set_allocation_observer(AllocationObserver* observer) {
  detail::g_allocation_observer.store(observer, std::memory_order_release);
}

std::int64_t exchange_injected_oom(std::int64_t after) {
  VDEV_RT(vdev::rt::config());  // a malformed configuration raises, as any first use does
  caches();                     // VDEV_OOM_AFTER is armed first, so that it is what we replace
  return vdev::rt::arm_fault_after(vdev::rt::Fault::kDeviceAlloc, after);
}

REGISTER_ALLOCATOR(kVdev, device_allocator());

}  // namespace vdev::backend
