#include "backend/memory/host_allocator.h"

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/common/stream_lookup.h"
#include "backend/common/vdev_device.h"
#include "backend/memory/allocation_observer.h"
#include "runtime/process.h"
#include "runtime/stream.h"

namespace vdev::backend {
namespace {

constexpr std::size_t kMinBlock = 512;
constexpr std::size_t kPageAlignment = 4096;
constexpr int kSizeClasses = 64;

// One pinned block. In use while refs > 0 (the DataPtr's reference and queued copies' ones).
struct PinnedBlock {
  void* ptr;
  std::size_t size;  // a power of two
  std::atomic<int> refs{0};
  std::vector<std::pair<vdev::rt::Stream*, std::uint64_t>> fences;  // guarded by State::mu
};

int size_class(std::size_t size) { return static_cast<int>(c10::llvm::Log2_64(size)); }

bool fences_done(const PinnedBlock& b) {
  for (const auto& [s, count] : b.fences) {
    if (s->completed_count() < count) return false;
  }
  return true;
}

struct State {
  std::mutex mu;
  std::map<std::uintptr_t, PinnedBlock*> blocks;             // every block obtained, by address
  std::array<std::vector<PinnedBlock*>, kSizeClasses> free;  // cached, reusable at once
  std::vector<PinnedBlock*> deferred;                        // released, waiting for their fences
  at::HostStats stats;

  // The block whose bytes include `ptr`, or null. Caller holds mu.
  PinnedBlock* block_containing(const void* ptr) const {
    const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = blocks.upper_bound(addr);
    if (it == blocks.begin()) return nullptr;
    --it;
    return addr < it->first + it->second->size ? it->second : nullptr;
  }

  void process_deferred() {
    std::vector<PinnedBlock*> still;
    for (PinnedBlock* b : deferred) {
      if (fences_done(*b)) {
        b->fences.clear();
        free[static_cast<std::size_t>(size_class(b->size))].push_back(b);
      } else {
        still.push_back(b);
      }
    }
    deferred.swap(still);
  }
};

// Leaked on purpose: pinned tensors may be freed during interpreter teardown.
State& state() {
  static State* s =
      vdev::rt::new_leaked_with_fork_lock<State>(vdev::rt::ForkLockLevel::kAllocators);
  return *s;
}

void release(PinnedBlock* b) {
  if (b->refs.fetch_sub(1) != 1) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.stats.active_requests.decrease(1);
  s.stats.active_bytes.decrease(b->size);
  if (fences_done(*b)) {
    b->fences.clear();
    s.free[static_cast<std::size_t>(size_class(b->size))].push_back(b);
  } else {
    s.deferred.push_back(b);
  }
}

void pinned_free(void* ctx) {
  if (ctx != nullptr) release(static_cast<PinnedBlock*>(ctx));
}

PinnedBlock* block_of(const c10::DataPtr& data_ptr) {
  if (data_ptr.get_deleter() != &pinned_free) return nullptr;
  return static_cast<PinnedBlock*>(data_ptr.get_context());
}

class PinnedHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(std::size_t nbytes) override {
    const c10::Device cpu(c10::kCPU);
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &pinned_free, cpu);
    const std::size_t size = c10::llvm::PowerOf2Ceil(std::max(nbytes, kMinBlock));
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    s.process_deferred();
    auto& cached = s.free[static_cast<std::size_t>(size_class(size))];
    PinnedBlock* b = nullptr;
    if (!cached.empty()) {
      b = cached.back();
      cached.pop_back();
    } else {
      void* p = std::aligned_alloc(kPageAlignment, std::max(size, kPageAlignment));
      TORCH_CHECK_WITH(OutOfMemoryError, p != nullptr, "vdev: cannot allocate ", nbytes,
                       " bytes of pinned host memory");
      b = new PinnedBlock{p, size};
      s.blocks.emplace(reinterpret_cast<std::uintptr_t>(p), b);
      s.stats.allocations.increase(1);
      s.stats.allocated_bytes.increase(size);
      ++s.stats.num_host_alloc;
    }
    b->refs.store(1);
    s.stats.active_requests.increase(1);
    s.stats.active_bytes.increase(size);
    // The copies that used the block before have finished (they held it): none of their accesses
    // can conflict with the new owner's (the sanitizer's records of them would).
    if (AllocationObserver* o = allocation_observer()) o->pinned_reused(b->ptr, size);
    return c10::DataPtr(b->ptr, b, &pinned_free, cpu);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &pinned_free; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  // `stream` uses the block that contains `ptr` from now until the work queued on it so far has
  // run; false for memory that is not a pinned block of ours. The block is found by address, as
  // PyTorch's CachingHostAllocatorImpl::record_event does when `ctx` is not one of its blocks:
  // callers may pass any tensor's pointer, so `ctx` is never trusted.
  bool record_event(void* ptr, void* /*ctx*/, c10::Stream stream) override {
    if (stream.device_type() != kVdev) return false;
    vdev::rt::Stream& rs = runtime_stream(stream);  // validated before taking the lock
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    PinnedBlock* b = s.block_containing(ptr);
    if (b == nullptr) return false;
    b->fences.emplace_back(&rs, rs.enqueued_count());
    return true;
  }

  void empty_cache() override {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    s.process_deferred();
    for (auto& list : s.free) {
      for (PinnedBlock* b : list) {
        s.blocks.erase(reinterpret_cast<std::uintptr_t>(b->ptr));
        s.stats.allocations.decrease(1);
        s.stats.allocated_bytes.decrease(b->size);
        ++s.stats.num_host_free;
        std::free(b->ptr);
        delete b;
      }
      list.clear();
    }
  }

  at::HostStats get_stats() override {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    return s.stats;
  }

  void reset_accumulated_stats() override {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    for_each_stat(s.stats, [](c10::CachingAllocator::Stat& st) { st.reset_accumulated(); });
    s.stats.num_host_alloc = s.stats.num_host_free = 0;
  }

  void reset_peak_stats() override {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    for_each_stat(s.stats, [](c10::CachingAllocator::Stat& st) { st.reset_peak(); });
  }

 private:
  template <typename F>
  static void for_each_stat(at::HostStats& s, F f) {
    for (auto* st : {&s.active_requests, &s.active_bytes, &s.allocations, &s.allocated_bytes}) {
      f(*st);
    }
  }
};

PinnedHostAllocator* instance() {
  static auto* a = new PinnedHostAllocator;  // leaked: see state()
  return a;
}

}  // namespace

at::HostAllocator* pinned_host_allocator() { return instance(); }

void register_host_allocator() { at::setHostAllocator(kVdev, instance()); }

std::shared_ptr<void> retain_pinned_memory(const c10::DataPtr& data_ptr) {
  PinnedBlock* b = block_of(data_ptr);
  if (b == nullptr) return nullptr;
  b->refs.fetch_add(1);
  return std::shared_ptr<void>(b, [](void* p) { release(static_cast<PinnedBlock*>(p)); });
}

bool is_pinned_ptr(const void* ptr) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.block_containing(ptr) != nullptr;
}

}  // namespace vdev::backend
