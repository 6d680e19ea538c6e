#include "backend/allocator.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "backend/check.h"
#include "backend/guard.h"
#include "runtime/device.h"
#include "runtime/memory.h"
#include "runtime/stream.h"

namespace vdev::backend {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr auto kVdev = c10::DeviceType::PrivateUse1;
constexpr std::size_t kSmallSize = 1 << 20;  // CUDA's small-pool limit, for per-pool stats

// One allocation. Freed when the last reference goes: the DataPtr's, or a queued task's.
struct Block {
  void* ptr;
  std::size_t size;       // bytes the runtime reserved (rounded)
  std::size_t requested;  // bytes asked for
  c10::DeviceIndex device;
  std::atomic<int> refs{1};
};

std::size_t rounded(std::size_t n) {
  const std::size_t a = vdev::rt::kDeviceAlignment;
  return (n + a - 1) / a * a;
}

class VdevAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(std::size_t nbytes) override {
    const auto device = static_cast<c10::DeviceIndex>(vdev::rt::get_device());
    const c10::Device dev(kVdev, device);
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &deleter, dev);
    void* p = nullptr;
    try {
      p = VDEV_RT(vdev::rt::device_malloc(device, nbytes));
    } catch (const c10::OutOfMemoryError&) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_for(device).num_ooms;
      throw;
    }
    auto* block = new Block{p, rounded(nbytes), nbytes, device, {1}};
    record(*block, /*alloc=*/true);
    return c10::DataPtr(p, block, &deleter, dev);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &deleter; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    const int device = vdev::rt::pointer_device(src);  // queued work may still write src
    if (device >= 0) sync_current_stream(c10::Device(kVdev, static_cast<c10::DeviceIndex>(device)));
    vdev::rt::memcpy_device_to_device(dest, src, count);
  }

  bool initialized() override { return true; }

  // Nothing is cached, so there is nothing to return.
  void emptyCache(c10::MempoolId_t) override {}

  // Nothing to record: every queued task holds the storages it uses, so a block is released only
  // after the last task using it (on any stream) has run.
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    VDEV_RT(vdev::rt::check_device_index(device, "memory_stats"));
    std::lock_guard<std::mutex> lock(mu_);
    return stats_for(device);
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    VDEV_RT(vdev::rt::check_device_index(device, "reset_accumulated_memory_stats"));
    std::lock_guard<std::mutex> lock(mu_);
    DeviceStats& s = stats_for(device);
    for_each_stat(s, [](Stat& st) { st.reset_accumulated(); });
    s.num_alloc_retries = s.num_ooms = s.num_sync_all_streams = 0;
    s.num_device_alloc = s.num_device_free = s.num_oom_rejections = 0;
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    VDEV_RT(vdev::rt::check_device_index(device, "reset_peak_memory_stats"));
    std::lock_guard<std::mutex> lock(mu_);
    for_each_stat(stats_for(device), [](Stat& st) { st.reset_peak(); });
  }

  std::pair<std::size_t, std::size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return VDEV_RT(vdev::rt::mem_get_info(device));
  }

  static void release(Block* block) {
    if (block == nullptr || block->refs.fetch_sub(1) != 1) return;
    vdev::rt::device_free(block->ptr);
    static_cast<VdevAllocator*>(device_allocator())->record(*block, /*alloc=*/false);
    delete block;
  }

  static void deleter(void* ctx) { release(static_cast<Block*>(ctx)); }

  static std::shared_ptr<void> retain(const c10::DataPtr& data_ptr) {
    if (data_ptr.get_deleter() != &deleter || data_ptr.get_context() == nullptr) return nullptr;
    auto* block = static_cast<Block*>(data_ptr.get_context());
    block->refs.fetch_add(1);
    return std::shared_ptr<void>(block, [](void* b) { release(static_cast<Block*>(b)); });
  }

 private:
  DeviceStats& stats_for(c10::DeviceIndex device) {
    if (stats_.size() <= static_cast<std::size_t>(device)) stats_.resize(device + 1);
    return stats_[static_cast<std::size_t>(device)];
  }

  // Applies f to every Stat of every StatArray in s.
  template <typename F>
  static void for_each_stat(DeviceStats& s, F f) {
    for (auto* arr :
         {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
          &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
      for (Stat& st : *arr) f(st);
    }
  }

  // One block is one allocation, one segment and one active block of b.size bytes.
  void record(const Block& b, bool alloc) {
    const auto pool = static_cast<std::size_t>(b.size <= kSmallSize ? StatType::SMALL_POOL
                                                                    : StatType::LARGE_POOL);
    const auto agg = static_cast<std::size_t>(StatType::AGGREGATE);
    std::lock_guard<std::mutex> lock(mu_);
    DeviceStats& s = stats_for(b.device);
    const std::pair<c10::CachingAllocator::StatArray*, std::size_t> changes[] = {
        {&s.allocation, 1},
        {&s.segment, 1},
        {&s.active, 1},
        {&s.allocated_bytes, b.size},
        {&s.reserved_bytes, b.size},
        {&s.active_bytes, b.size},
        {&s.requested_bytes, b.requested}};
    for (const auto& [arr, amount] : changes) {
      for (std::size_t i : {agg, pool}) {
        alloc ? (*arr)[i].increase(amount) : (*arr)[i].decrease(amount);
      }
    }
    alloc ? ++s.num_device_alloc : ++s.num_device_free;
  }

  std::mutex mu_;
  std::vector<DeviceStats> stats_;
};

}  // namespace

std::shared_ptr<void> retain_device_memory(const c10::DataPtr& data_ptr) {
  return VdevAllocator::retain(data_ptr);
}

c10::DeviceAllocator* device_allocator() {
  // Leaked on purpose: tensors may be freed during interpreter teardown, after static destructors.
  static VdevAllocator* instance = new VdevAllocator;
  return instance;
}

void resize_storage_bytes(c10::StorageImpl* storage, std::size_t nbytes) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  const std::size_t old_nbytes = storage->nbytes();
  if (nbytes == old_nbytes) return;
  c10::Device device = storage->device();
  if (device.type() != kVdev) device = c10::Device(kVdev, vdev::rt::get_device());
  const c10::DeviceGuard guard(device);  // the allocator allocates on the current device
  // Queued tasks keep the StorageImpl alive, not its DataPtr, which is replaced (and the old block
  // freed) below: wait for every stream of the device, not just the current one. Resizing is
  // rare and synchronous anyway.
  VDEV_RT(vdev::rt::synchronize_device(device.index()));
  c10::Allocator* alloc = storage->allocator() ? storage->allocator() : device_allocator();
  c10::DataPtr fresh = alloc->allocate(nbytes);
  const std::size_t keep = std::min(old_nbytes, nbytes);
  if (keep > 0 && storage->data() != nullptr) {
    vdev::rt::memcpy_device_to_device(fresh.get(), storage->data(), keep);
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, device_allocator());

}  // namespace vdev::backend
