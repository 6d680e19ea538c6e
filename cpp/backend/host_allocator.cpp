#include "backend/host_allocator.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

namespace vdev::backend {
namespace {

constexpr std::size_t kAlignment = 64;

struct PinnedTable {
  std::mutex mu;
  std::map<std::uintptr_t, std::size_t> live;  // start -> size
};

// Leaked on purpose: pinned tensors may be freed during interpreter teardown.
PinnedTable& table() {
  static PinnedTable* t = new PinnedTable;
  return *t;
}

// One pinned allocation, freed when the last reference goes (the DataPtr's or a queued task's).
struct PinnedBlock {
  void* ptr;
  std::atomic<int> refs{1};
};

void pinned_release(PinnedBlock* block) {
  if (block == nullptr || block->refs.fetch_sub(1) != 1) return;
  {
    std::lock_guard<std::mutex> lock(table().mu);
    table().live.erase(reinterpret_cast<std::uintptr_t>(block->ptr));
  }
  std::free(block->ptr);
  delete block;
}

void pinned_free(void* ctx) { pinned_release(static_cast<PinnedBlock*>(ctx)); }

class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t nbytes) override {
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &pinned_free, c10::Device(c10::kCPU));
    const std::size_t size = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, size);
    TORCH_CHECK_WITH(OutOfMemoryError, p != nullptr, "vdev: cannot allocate ", nbytes,
                     " bytes of pinned host memory");
    {
      std::lock_guard<std::mutex> lock(table().mu);
      table().live.emplace(reinterpret_cast<std::uintptr_t>(p), size);
    }
    return c10::DataPtr(p, new PinnedBlock{p, {1}}, &pinned_free, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &pinned_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

c10::Allocator* pinned_host_allocator() {
  static PinnedHostAllocator* instance = new PinnedHostAllocator;
  return instance;
}

std::shared_ptr<void> retain_pinned_memory(const c10::DataPtr& data_ptr) {
  if (data_ptr.get_deleter() != &pinned_free || data_ptr.get_context() == nullptr) return nullptr;
  auto* block = static_cast<PinnedBlock*>(data_ptr.get_context());
  block->refs.fetch_add(1);
  return std::shared_ptr<void>(block,
                               [](void* b) { pinned_release(static_cast<PinnedBlock*>(b)); });
}

bool is_pinned_ptr(const void* ptr) {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(table().mu);
  auto it = table().live.upper_bound(addr);
  if (it == table().live.begin()) return false;
  --it;
  return addr < it->first + it->second;
}

}  // namespace vdev::backend
