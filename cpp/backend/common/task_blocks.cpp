#include "backend/common/task_blocks.h"

#include <array>
#include <atomic>
#include <new>
#include <utility>

namespace vdev::backend {
namespace {

constexpr std::size_t kGranule = 256;
constexpr std::size_t kClasses = 16;  // blocks of up to 4 KiB; larger ones come from malloc
constexpr std::size_t kMaxPooledBlocks = 4096;
constexpr std::size_t kCountBatch = 64;

struct Node {
  Node* next;
};

struct SizeClass {
  std::atomic<Node*> returned{nullptr};  // given back, not yet taken by a host thread
  std::atomic<std::size_t> pooled{0};    // blocks in `returned` and in the host threads' lists
};

std::array<SizeClass, kClasses>& classes() {
  static auto* c = new std::array<SizeClass, kClasses>();  // leaked: used until exit
  return *c;
}

// A host thread's blocks, taken back from `returned` in one exchange (which, unlike popping one
// node with a compare-and-swap, cannot be fooled by a node that left and came back).
// The blocks it took are subtracted from `pooled` kCountBatch at a time (and when it takes a list
// back), not one by one: `pooled` is written by the stream worker at every give, and an atomic
// change of it per task on the host too moved its cache line between the two cores at every task.
// The cap it serves is a bound: `pooled` counts at most kCountBatch - 1 blocks per thread and
// class that have left.
struct LocalLists {
  std::array<Node*, kClasses> head{};
  std::array<std::size_t, kClasses> taken{};  // since the last take-back
  ~LocalLists() {
    for (std::size_t c = 0; c < kClasses; ++c) {
      classes()[c].pooled.fetch_sub(taken[c], std::memory_order_relaxed);
      while (Node* n = head[c]) {
        head[c] = n->next;
        classes()[c].pooled.fetch_sub(1, std::memory_order_relaxed);
        ::operator delete(n);
      }
    }
  }
};
thread_local LocalLists t_lists;

}  // namespace

void* take_task_block(std::size_t size) {
  const std::size_t c = (size + kGranule - 1) / kGranule - 1;
  if (size == 0 || c >= kClasses) return ::operator new(size);
  Node*& head = t_lists.head[c];
  if (head == nullptr) {
    SizeClass& sc = classes()[c];
    sc.pooled.fetch_sub(std::exchange(t_lists.taken[c], 0), std::memory_order_relaxed);
    head = sc.returned.exchange(nullptr, std::memory_order_acquire);
    if (head == nullptr) return ::operator new((c + 1) * kGranule);
  }
  Node* n = head;
  head = n->next;
  if (++t_lists.taken[c] == kCountBatch) {
    classes()[c].pooled.fetch_sub(std::exchange(t_lists.taken[c], 0), std::memory_order_relaxed);
  }
  return n;
}

void give_task_block(void* block, std::size_t size) noexcept {
  const std::size_t c = (size + kGranule - 1) / kGranule - 1;
  if (size == 0 || c >= kClasses ||
      classes()[c].pooled.load(std::memory_order_relaxed) >= kMaxPooledBlocks) {
    ::operator delete(block);
    return;
  }
  SizeClass& sc = classes()[c];
  sc.pooled.fetch_add(1, std::memory_order_relaxed);
  Node* n = static_cast<Node*>(block);
  n->next = sc.returned.load(std::memory_order_relaxed);
  while (!sc.returned.compare_exchange_weak(n->next, n, std::memory_order_release,
                                            std::memory_order_relaxed)) {
  }
}

}  // namespace vdev::backend
