#include "backend/memory/device_cache.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "backend/memory/cache_stats.h"
#include "runtime/errors.h"
#include "runtime/fault_injection.h"
#include "runtime/memory.h"
#include "runtime/process.h"
#include "runtime/stream_registry.h"

namespace vdev::backend {

using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::SegmentInfo;

namespace {

constexpr std::size_t kMinBlockSize = 512;        // every request is rounded up to this
constexpr std::size_t kSmallSize = 1 << 20;       // largest request of the small pool
constexpr std::size_t kSmallBuffer = 2 << 20;     // segment size of the small pool
constexpr std::size_t kLargeBuffer = 20 << 20;    // segment size for requests below kMinLargeAlloc
constexpr std::size_t kMinLargeAlloc = 10 << 20;  // from here, segments fit the request
constexpr std::size_t kRoundLarge = 2 << 20;      // ... rounded up to this

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

std::size_t block_size_for(std::size_t nbytes) {
  return nbytes < kMinBlockSize ? kMinBlockSize : round_up(nbytes, kMinBlockSize);
}

std::size_t segment_size_for(std::size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return round_up(size, kRoundLarge);
}

}  // namespace

struct PrivatePool;
struct Segment;

struct Block {
  int device;
  vdev::rt::Stream* stream;  // the stream it was allocated on; only reused there
  bool small;                // its pool
  PrivatePool* owner;        // a graph's private pool, or null for the device's pools
  std::size_t size;          // bytes of the block (a multiple of kMinBlockSize)
  char* ptr;                 // device address
  std::size_t requested = 0;
  bool allocated = false;
  Block* prev = nullptr;  // neighbours within the segment
  Block* next = nullptr;
  std::vector<vdev::rt::Stream*> uses;  // other streams declared with record_stream
  // A deferred free: (stream, enqueued count at the free); reusable once every one has completed.
  std::vector<std::pair<vdev::rt::Stream*, std::uint64_t>> fences;
  Segment* segment = nullptr;                     // the device allocation it lies in
  std::shared_ptr<c10::GatheredContext> context;  // its allocation's stack (memory history)

  bool is_split() const { return prev != nullptr || next != nullptr; }
};

// One allocation from the runtime, split into the blocks from `head` on (memory snapshots walk
// them; the cache itself needs only the blocks' neighbour links).
struct Segment {
  char* base;
  std::size_t size;
  Block* head;                                    // the block at `base`
  std::shared_ptr<c10::GatheredContext> context;  // the stack of the allocation that made it
};

namespace {

// Pool order: by owner, then stream, then size, then address, so lower_bound finds the best fit
// on a stream within one pool.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->owner != b->owner) return std::less<const void*>{}(a->owner, b->owner);
    if (a->stream != b->stream) return std::less<const void*>{}(a->stream, b->stream);
    if (a->size != b->size) return a->size < b->size;
    return std::less<const void*>{}(a->ptr, b->ptr);
  }
};

using Pool = std::set<Block*, BlockOrder>;

}  // namespace

// The private pool of one or more graphs (MempoolId_t): its segments serve only allocations made
// while a capture allocates to it, and are not handed to other work while a graph uses it.
struct PrivatePool {
  c10::MempoolId_t id;
  int use_count = 1;  // graphs (and captures) holding it; at 0 its free segments are released
  int segments = 0;   // segments it owns
  Pool small_pool, large_pool;
};

struct DeviceCache::State {
  int device;
  std::mutex mu;
  Pool small_pool, large_pool;
  std::vector<Block*> deferred;  // freed blocks waiting for their fences
  DeviceStats stats;
  double fraction = 1.0;
  std::map<c10::MempoolId_t, PrivatePool*> private_pools;
  // Captures allocating to a private pool now: (capture id, pool).
  std::vector<std::pair<std::uint64_t, PrivatePool*>> capturing;
  std::map<const char*, Segment*> segments;  // by base address
  bool (*reclaim)() = nullptr;               // see the constructor

  // Memory history. `recording` mirrors history.enabled for the check made before the lock is
  // taken (where stacks are gathered); `gather_fn` and `gather_when` are what that check reads.
  std::atomic<bool> recording{false};
  std::atomic<c10::CachingDeviceAllocator::CreateContextFn> gather_fn{nullptr};
  std::atomic<int> gather_when{static_cast<int>(RecordContext::NEVER)};
  HistorySettings history;
  TraceRing trace;
  std::vector<std::string> compile_context;  // innermost last
  std::string user_metadata;

  // Blocks merged away and one tree node, kept for the next split and pool insert: an allocation
  // that splits a free block and the free that merges it back (a small operator's output) then
  // call no malloc (measured: a third of the cache's instructions per allocation and free).
  static constexpr std::size_t kMaxSpareBlocks = 64;
  std::vector<Block*> spare_blocks;  // reserved: retiring a block never allocates
  Pool::node_type spare_node;

  State() {
    stats.max_split_size = -1;  // blocks of any size may be split, as CUDA's default
    spare_blocks.reserve(kMaxSpareBlocks);
  }
  ~State() {
    for (Block* b : spare_blocks) delete b;
  }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  Block* new_block(vdev::rt::Stream* stream, bool small, PrivatePool* owner, std::size_t size,
                   char* ptr) {
    if (spare_blocks.empty()) return new Block{device, stream, small, owner, size, ptr};
    Block* b = spare_blocks.back();
    spare_blocks.pop_back();
    *b = Block{device, stream, small, owner, size, ptr};
    return b;
  }
  void retire_block(Block* b) {
    if (spare_blocks.size() < kMaxSpareBlocks) {
      spare_blocks.push_back(b);
    } else {
      delete b;
    }
  }
  void insert(Pool& p, Block* b) {
    if (spare_node.empty()) {
      p.insert(b);
      return;
    }
    spare_node.value() = b;
    p.insert(std::move(spare_node));
  }

  Pool& pool(PrivatePool* owner, bool small) {
    if (owner != nullptr) return small ? owner->small_pool : owner->large_pool;
    return small ? small_pool : large_pool;
  }
  Pool& pool(const Block* b) { return pool(b->owner, b->small); }

  // The calling thread's stack if history keeps stacks for `use` (called without the lock).
  std::shared_ptr<c10::GatheredContext> gather_context(RecordContext use) const {
    const auto fn = gather_fn.load(std::memory_order_relaxed);
    if (fn == nullptr || gather_when.load(std::memory_order_relaxed) < static_cast<int>(use)) {
      return nullptr;
    }
    return fn();
  }

  // Records a trace entry while history is on (and the action is not skipped).
  void record(TraceEntry::Action action, std::size_t addr, std::size_t size,
              const vdev::rt::Stream* stream, const PrivatePool* owner,
              std::shared_ptr<c10::GatheredContext> context) {
    if (!history.enabled || ((history.skip >> action) & 1U) != 0) return;
    if (history.when < RecordContext::ALLOC) context = nullptr;
    TraceEntry e(action, static_cast<c10::DeviceIndex>(device), addr, size, stream_key(stream),
                 owner != nullptr ? owner->id : c10::MempoolId_t{0, 0}, 0, std::move(context),
                 compile_context.empty() ? "N/A" : compile_context.back(), user_metadata);
    e.time_.t_ = trace_time_us();
    trace.add(std::move(e));
  }

  // A stream as snapshots name it: its id (0: the default stream), as an int where CUDA's has its
  // cudaStream_t.
  static void* stream_key(const vdev::rt::Stream* stream) {
    return stream == nullptr ? nullptr
                             : reinterpret_cast<void*>(static_cast<std::intptr_t>(stream->id()));
  }

  // Tells a profile that records memory about an allocation (delta > 0) or free, with the
  // device's totals after it, as CUDA's allocator does.
  void report_to_profiler(void* ptr, std::int64_t delta) const {
    c10::reportMemoryUsageToProfiler(
        ptr, delta, static_cast<std::size_t>(current_aggregate(stats.allocated_bytes)),
        static_cast<std::size_t>(current_aggregate(stats.reserved_bytes)),
        c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
  }

  // The private pool an allocation on `stream` goes to (null: the device's pools).
  PrivatePool* pool_for(const vdev::rt::Stream& stream) {
    if (capturing.empty()) return nullptr;
    const std::uint64_t id = stream.capture_id();
    if (id == 0) return nullptr;
    for (const auto& [capture, p] : capturing) {
      if (capture == id) return p;
    }
    return nullptr;
  }

  std::size_t capacity() const { return vdev::rt::memory_stats(device).capacity; }
  std::size_t allowed() const {
    return static_cast<std::size_t>(fraction * static_cast<double>(capacity()));
  }

  // Best fit on `stream` in the pool, removed from it; null if none.
  Block* take_free_block(PrivatePool* owner, bool small, vdev::rt::Stream* stream,
                         std::size_t size) {
    Pool& p = pool(owner, small);
    Block key{device, stream, small, owner, size, nullptr};
    auto it = p.lower_bound(&key);
    if (it == p.end() || (*it)->stream != stream || (*it)->owner != owner) return nullptr;
    Block* b = *it;
    spare_node = p.extract(it);
    return b;
  }

  // A fresh segment as one block, or null when the device (or the fraction) has no room. When the
  // usual segment size does not fit, a segment of just the block's size is tried: a device
  // configured with little memory (VDEV_DEVICE_MEMORY=1MiB) stays usable to the last byte.
  // `context`: the allocating stack, if history keeps stacks.
  Block* new_segment(PrivatePool* owner, bool small, vdev::rt::Stream* stream, std::size_t size,
                     const std::shared_ptr<c10::GatheredContext>& context) {
    const auto reserved = static_cast<std::size_t>(current_aggregate(stats.reserved_bytes));
    void* p = nullptr;
    std::size_t bytes = 0;
    for (std::size_t candidate : {segment_size_for(size), size}) {
      if (p != nullptr || reserved + candidate > allowed()) continue;
      try {
        p = vdev::rt::device_malloc(device, candidate);
        bytes = candidate;
      } catch (const vdev::rt::OutOfMemory&) {
      }
    }
    if (p == nullptr) return nullptr;
    add_to_stat(stats.segment, small, 1);
    add_to_stat(stats.reserved_bytes, small, static_cast<std::int64_t>(bytes));
    ++stats.num_device_alloc;
    if (owner != nullptr) ++owner->segments;
    auto* b = new Block{device, stream, small, owner, bytes, static_cast<char*>(p)};
    b->segment = new Segment{b->ptr, bytes, b, context};
    segments.emplace(b->ptr, b->segment);
    if (C10_UNLIKELY(history.enabled)) {
      record(TraceEntry::SEGMENT_ALLOC, reinterpret_cast<std::size_t>(b->ptr), bytes, stream, owner,
             context);
    }
    return b;
  }

  // Moves deferred blocks whose fences have all completed back to their pools.
  void process_deferred() {
    if (deferred.empty()) return;
    std::vector<Block*> still;
    for (Block* b : deferred) {
      bool done = true;
      for (const auto& [s, count] : b->fences) done &= s->completed_count() >= count;
      if (done) {
        b->fences.clear();
        release_to_pool(b);
      } else {
        still.push_back(b);
      }
    }
    deferred.swap(still);
  }

  // Returns a no longer active block to its pool, merging it with free neighbours. `context`: the
  // freeing stack, if history keeps stacks of frees.
  void release_to_pool(Block* b, std::shared_ptr<c10::GatheredContext>* context = nullptr) {
    if (C10_UNLIKELY(history.enabled)) {
      record(TraceEntry::FREE_COMPLETED, reinterpret_cast<std::size_t>(b->ptr), b->requested,
             b->stream, b->owner,
             context != nullptr && *context != nullptr ? std::move(*context) : b->context);
    }
    b->requested = 0;
    if (C10_UNLIKELY(b->context != nullptr)) b->context.reset();  // free blocks show no stack
    const std::size_t original = b->size;
    std::int64_t split_blocks = 0, split_bytes = 0;
    for (Block* n : {b->prev, b->next}) {
      if (n == nullptr || n->allocated || !n->fences.empty()) continue;
      spare_node = pool(n).extract(n);
      split_blocks -= 1;  // n was an inactive split block; it disappears into b
      split_bytes -= static_cast<std::int64_t>(n->size);
      if (n == b->prev) {
        b->ptr = n->ptr;
        b->prev = n->prev;
        if (b->prev) {
          b->prev->next = b;
        } else {
          b->segment->head = b;
        }
      } else {
        b->next = n->next;
        if (b->next) b->next->prev = b;
      }
      b->size += n->size;
      retire_block(n);
    }
    if (b->is_split()) {
      split_blocks += 1;
      split_bytes += static_cast<std::int64_t>(b->size);
    }
    add_to_stat(stats.inactive_split, b->small, split_blocks);
    add_to_stat(stats.inactive_split_bytes, b->small, split_bytes);
    add_to_stat(stats.active, b->small, -1);
    add_to_stat(stats.active_bytes, b->small, -static_cast<std::int64_t>(original));
    b->uses.clear();
    insert(pool(b), b);
  }

  // Gives every whole free segment back to the runtime. The caller has made sure that no queued
  // work can still use them (wait_then_release_free_segments).
  // Private pools no graph uses any more are released too (and forgotten once they own nothing).
  void release_free_segments() {
    process_deferred();
    release_segments_of(small_pool);
    release_segments_of(large_pool);
    for (auto it = private_pools.begin(); it != private_pools.end();) {
      PrivatePool* p = it->second;
      if (p->use_count > 0) {
        ++it;
        continue;
      }
      release_segments_of(p->small_pool);
      release_segments_of(p->large_pool);
      if (p->segments == 0) {
        delete p;
        it = private_pools.erase(it);
      } else {
        ++it;
      }
    }
  }

  void release_segments_of(Pool& pool) {
    for (auto it = pool.begin(); it != pool.end();) {
      Block* b = *it;
      if (b->is_split()) {
        ++it;
        continue;
      }
      it = pool.erase(it);
      if (C10_UNLIKELY(history.enabled)) {
        record(TraceEntry::SEGMENT_FREE, reinterpret_cast<std::size_t>(b->ptr), b->size, b->stream,
               b->owner, b->segment->context);
      }
      segments.erase(b->ptr);
      delete b->segment;
      vdev::rt::device_free(b->ptr);
      add_to_stat(stats.segment, b->small, -1);
      add_to_stat(stats.reserved_bytes, b->small, -static_cast<std::int64_t>(b->size));
      ++stats.num_device_free;
      if (b->owner != nullptr) --b->owner->segments;
      delete b;
    }
  }

  // Gives every whole free segment back to the runtime once no queued work of the device can use
  // it. The wait happens with the lock held, as CUDA's allocator synchronizes under its own: the
  // free blocks cannot change meanwhile, concurrent allocations wait for the release instead of
  // failing, and blocks whose record_stream fences complete during the wait are released too. The
  // wait never parks a daemon thread at interpreter exit (it would hold the lock for good, and the
  // exiting thread would deadlock on its next free): then it returns false, nothing is released,
  // and the caller parks the thread once it has released the lock.
  bool wait_then_release_free_segments() {
    if (!vdev::rt::wait_device_idle_unless_stopping(device)) return false;
    ++stats.num_sync_all_streams;
    release_free_segments();
    return true;
  }

  // A block when no cached one fits: a new segment, else one after releasing the cache (as CUDA's
  // allocator retries), else the same after `reclaim` freed memory held elsewhere; null if none.
  // May release `lock` meanwhile; `owner` is then recomputed. Kept out of allocate's cached path.
  Block* allocate_uncached(std::unique_lock<std::mutex>& lock, PrivatePool*& owner, bool small,
                           vdev::rt::Stream& stream, std::size_t size,
                           const std::shared_ptr<c10::GatheredContext>& context) {
    for (bool reclaimed = false;;) {
      Block* b = new_segment(owner, small, &stream, size, context);
      if (b != nullptr) return b;
      ++stats.num_alloc_retries;
      if (wait_then_release_free_segments()) {
        b = new_segment(owner, small, &stream, size, context);
        if (b != nullptr) return b;
      } else {  // exit: a daemon thread parks here, holding nothing
        lock.unlock();
        vdev::rt::park_if_stray_at_exit();
        lock.lock();
      }
      if (reclaimed || reclaim == nullptr) return nullptr;
      lock.unlock();
      const bool freed = reclaim();  // frees through free(): without the lock
      lock.lock();
      if (!freed) return nullptr;
      reclaimed = true;
      process_deferred();
      owner = pool_for(stream);
      b = take_free_block(owner, small, &stream, size);
      if (b != nullptr) return b;
    }
  }

  // Raises the out-of-memory error for a request of `nbytes` on `stream`, after recording it
  // (history, profiler) and calling the observers with `lock` released.
  [[noreturn]] void out_of_memory(std::unique_lock<std::mutex>& lock, std::size_t nbytes,
                                  const vdev::rt::Stream& stream, const PrivatePool* owner,
                                  std::shared_ptr<c10::GatheredContext> context) {
    ++stats.num_ooms;
    const auto [free_bytes, total] = vdev::rt::mem_get_info(device);
    const OutOfMemoryFacts facts{device,
                                 nbytes,
                                 total,
                                 free_bytes,
                                 static_cast<std::size_t>(current_aggregate(stats.allocated_bytes)),
                                 static_cast<std::size_t>(current_aggregate(stats.reserved_bytes)),
                                 fraction,
                                 allowed()};
    // CUDA's OOM entry carries the device's free bytes where others carry an address.
    record(TraceEntry::OOM, free_bytes, nbytes, &stream, owner, std::move(context));
    if (c10::memoryProfilingEnabled()) {
      c10::reportOutOfMemoryToProfiler(
          static_cast<std::int64_t>(nbytes), facts.allocated, facts.reserved,
          c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
    }
    std::string message = out_of_memory_message(facts);
    const std::size_t limit = fraction < 1.0 ? facts.allowed : total;
    // Observers may look at the allocator (a snapshot takes the lock), so they run without it;
    // nothing read below depends on the cache any more.
    lock.unlock();
    for (const OutOfMemoryObserver& observer : out_of_memory_observers()) {
      observer(device, nbytes, limit, free_bytes);
    }
    TORCH_CHECK_WITH(OutOfMemoryError, false, message);
  }
};

DeviceCache::DeviceCache(int device, bool (*reclaim)()) : s_(std::make_unique<State>()) {
  s_->device = device;
  s_->reclaim = reclaim;
  // Device caches are never destroyed (backend/memory/allocator.cpp), so the lock outlives forks.
  vdev::rt::register_fork_lock(&s_->mu, vdev::rt::ForkLockLevel::kAllocators);
}
DeviceCache::~DeviceCache() = default;

Block* DeviceCache::allocate(std::size_t nbytes, vdev::rt::Stream& stream) {
  State& s = *s_;
  const std::size_t size = block_size_for(nbytes);
  const bool small = size <= kSmallSize;
  std::shared_ptr<c10::GatheredContext> context;
  if (C10_UNLIKELY(s.recording.load(std::memory_order_relaxed))) {
    context = s.gather_context(RecordContext::STATE);  // before the lock: it may take the GIL
  }
  std::unique_lock<std::mutex> lock(s.mu);
  if (C10_UNLIKELY(vdev::rt::take_injected_fault(vdev::rt::Fault::kDeviceAlloc))) {
    // An injected out-of-memory error (VDEV_OOM_AFTER, inject_oom): the real one's path, so
    // that statistics, history and observers see the same; the cache is left as it is.
    s.out_of_memory(lock, nbytes, stream, s.pool_for(stream), std::move(context));
  }
  s.process_deferred();
  PrivatePool* owner = s.pool_for(stream);
  Block* b = s.take_free_block(owner, small, &stream, size);
  if (C10_UNLIKELY(b == nullptr))
    b = s.allocate_uncached(lock, owner, small, stream, size, context);
  if (b == nullptr) s.out_of_memory(lock, nbytes, stream, owner, std::move(context));

  const bool was_split = b->is_split();
  const std::size_t rest = b->size - size;
  if (small ? rest >= kMinBlockSize : rest > kSmallSize) {
    Block* remaining = s.new_block(&stream, small, owner, rest, b->ptr + size);
    remaining->segment = b->segment;
    remaining->prev = b;
    remaining->next = b->next;
    if (remaining->next) remaining->next->prev = remaining;
    b->next = remaining;
    b->size = size;
    s.insert(s.pool(owner, small), remaining);
    if (was_split) {
      add_to_stat(s.stats.inactive_split_bytes, small, -static_cast<std::int64_t>(size));
    } else {
      add_to_stat(s.stats.inactive_split, small, 1);
      add_to_stat(s.stats.inactive_split_bytes, small, static_cast<std::int64_t>(rest));
    }
  } else if (was_split) {
    add_to_stat(s.stats.inactive_split, small, -1);
    add_to_stat(s.stats.inactive_split_bytes, small, -static_cast<std::int64_t>(b->size));
  }
  b->allocated = true;
  b->requested = nbytes;
  add_to_stat(s.stats.allocation, small, 1);
  add_to_stat(s.stats.allocated_bytes, small, static_cast<std::int64_t>(b->size));
  add_to_stat(s.stats.active, small, 1);
  add_to_stat(s.stats.active_bytes, small, static_cast<std::int64_t>(b->size));
  add_to_stat(s.stats.requested_bytes, small, static_cast<std::int64_t>(nbytes));
  if (C10_UNLIKELY(s.history.enabled)) {
    if (s.history.when >= RecordContext::STATE) b->context = context;
    s.record(TraceEntry::ALLOC, reinterpret_cast<std::size_t>(b->ptr), nbytes, &stream, owner,
             std::move(context));
  }
  if (C10_UNLIKELY(c10::memoryProfilingEnabled())) {
    s.report_to_profiler(b->ptr, static_cast<std::int64_t>(b->size));
  }
  return b;
}

void DeviceCache::free(Block* b) {
  State& s = *s_;
  std::shared_ptr<c10::GatheredContext> context;
  if (C10_UNLIKELY(s.recording.load(std::memory_order_relaxed))) {
    context = s.gather_context(RecordContext::ALL);  // before the lock: it may take the GIL
  }
  std::lock_guard<std::mutex> lock(s.mu);
  b->allocated = false;
  add_to_stat(s.stats.allocation, b->small, -1);
  add_to_stat(s.stats.allocated_bytes, b->small, -static_cast<std::int64_t>(b->size));
  add_to_stat(s.stats.requested_bytes, b->small, -static_cast<std::int64_t>(b->requested));
  if (C10_UNLIKELY(c10::memoryProfilingEnabled())) {
    s.report_to_profiler(b->ptr, -static_cast<std::int64_t>(b->size));
  }
  if (C10_UNLIKELY(s.history.enabled)) {
    s.record(TraceEntry::FREE_REQUESTED, reinterpret_cast<std::size_t>(b->ptr), b->requested,
             b->stream, b->owner, context);
  }
  if (!b->uses.empty()) {
    // Still active until its fences complete; `requested` stays for snapshots until then.
    for (vdev::rt::Stream* use : b->uses) b->fences.emplace_back(use, use->enqueued_count());
    b->uses.clear();
    s.deferred.push_back(b);
    s.process_deferred();  // (they may have completed already)
    return;
  }
  s.release_to_pool(b, &context);
}

void DeviceCache::record_stream(Block* b, vdev::rt::Stream& stream) {
  std::lock_guard<std::mutex> lock(s_->mu);
  if (&stream == b->stream) return;  // ordered by the stream itself
  if (std::find(b->uses.begin(), b->uses.end(), &stream) == b->uses.end()) {
    b->uses.push_back(&stream);
  }
}

void DeviceCache::empty_cache() {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->wait_then_release_free_segments();
  }
  vdev::rt::park_if_stray_at_exit();  // a daemon thread whose wait ended at exit, holding nothing
}

void DeviceCache::begin_allocate_to_pool(MempoolId pool, std::uint64_t capture_id) {
  std::lock_guard<std::mutex> lock(s_->mu);
  PrivatePool*& p = s_->private_pools[pool];
  if (p == nullptr) {
    p = new PrivatePool;
    p->id = pool;
  } else {
    ++p->use_count;  // a pool shared by several graphs (or released and reused)
  }
  s_->capturing.emplace_back(capture_id, p);
}

void DeviceCache::end_allocate_to_pool(std::uint64_t capture_id) {
  std::lock_guard<std::mutex> lock(s_->mu);
  auto& c = s_->capturing;
  c.erase(std::remove_if(c.begin(), c.end(), [&](const auto& e) { return e.first == capture_id; }),
          c.end());
}

void DeviceCache::release_pool(MempoolId pool) {
  std::lock_guard<std::mutex> lock(s_->mu);
  auto it = s_->private_pools.find(pool);
  if (it == s_->private_pools.end() || it->second->use_count == 0) return;
  // At 0 no graph uses it: its segments go back to the device at the next empty_cache() or
  // out-of-memory retry, which first wait for the device's queued work (a replay still queued may
  // write into them). Not here: destroying a graph must not wait for the device, as on CUDA.
  --it->second->use_count;
}

void DeviceCache::set_memory_fraction(double fraction) {
  std::lock_guard<std::mutex> lock(s_->mu);
  s_->fraction = fraction;
}

double DeviceCache::memory_fraction() {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->fraction;
}

DeviceStats DeviceCache::stats() {
  std::lock_guard<std::mutex> lock(s_->mu);
  s_->process_deferred();
  return s_->stats;
}

void DeviceCache::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(s_->mu);
  reset_accumulated(s_->stats);
}

void DeviceCache::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(s_->mu);
  reset_peaks(s_->stats);
}

BlockInfo DeviceCache::info(const Block* b) { return {b->ptr, b->size, b->device, b->stream}; }

void DeviceCache::record_history(const HistorySettings& settings) {
  State& s = *s_;
  TORCH_CHECK(!settings.enabled || settings.when == RecordContext::NEVER || settings.gather,
              "record_history: keeping stacks needs a function that gathers them");
  std::lock_guard<std::mutex> lock(s.mu);
  s.history = settings;
  if (!settings.enabled) s.history.when = RecordContext::NEVER;
  // As CUDA's: stopping drops the entries; blocks keep the stacks they were allocated with.
  s.trace.configure(settings.max_entries, settings.clear || !settings.enabled);
  const bool stacks = settings.enabled && settings.when != RecordContext::NEVER;
  s.gather_fn.store(stacks ? settings.gather : nullptr, std::memory_order_relaxed);
  s.gather_when.store(static_cast<int>(s.history.when), std::memory_order_relaxed);
  s.recording.store(settings.enabled, std::memory_order_relaxed);
}

CacheSnapshot DeviceCache::snapshot(bool include_trace) {
  State& s = *s_;
  std::lock_guard<std::mutex> lock(s.mu);
  s.process_deferred();  // as stats() does, so that the two agree
  s.record(TraceEntry::SNAPSHOT, 0,
           static_cast<std::size_t>(current_aggregate(s.stats.active_bytes)), nullptr, nullptr,
           nullptr);
  CacheSnapshot out;
  out.segments.reserve(s.segments.size());
  for (const auto& [base, seg] : s.segments) {
    const Block* head = seg->head;
    SegmentInfo info;
    info.device = static_cast<c10::DeviceIndex>(s.device);
    info.address = reinterpret_cast<std::size_t>(base);
    info.total_size = seg->size;
    info.stream = State::stream_key(head->stream);  // every block of a segment has its stream
    info.is_large = !head->small;
    info.owner_private_pool_id = head->owner != nullptr ? head->owner->id : c10::MempoolId_t{0, 0};
    info.context_when_allocated = seg->context;
    for (const Block* b = head; b != nullptr; b = b->next) {
      c10::CachingDeviceAllocator::BlockInfo block;
      block.size = b->size;
      block.requested_size = b->requested;
      block.allocated = b->allocated;
      block.active = b->allocated || !b->fences.empty();  // a deferred free is still active
      block.context_when_allocated = b->context;
      if (block.allocated) info.allocated_size += b->size;
      if (block.active) {
        info.active_size += b->size;
        info.requested_size += b->requested;
      }
      info.blocks.push_back(std::move(block));
    }
    out.segments.push_back(std::move(info));
  }
  if (include_trace) out.trace = s.trace.entries();
  return out;
}

void DeviceCache::push_compile_context(std::string name) {
  std::lock_guard<std::mutex> lock(s_->mu);
  s_->compile_context.push_back(std::move(name));
}

void DeviceCache::pop_compile_context() {
  std::lock_guard<std::mutex> lock(s_->mu);
  if (!s_->compile_context.empty()) s_->compile_context.pop_back();
}

void DeviceCache::set_user_metadata(std::string metadata) {
  std::lock_guard<std::mutex> lock(s_->mu);
  s_->user_metadata = std::move(metadata);
}

std::string DeviceCache::user_metadata() {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->user_metadata;
}

}  // namespace vdev::backend
