// Tests of the caching allocator's core (backend/device_cache.cpp) without libtorch: it needs only
// c10's headers and library and the runtime, so it builds with the sanitizers (-DVDEV_USE_TSAN /
// -DVDEV_USE_ASAN with -DVDEV_BUILD_CACHE_TESTS=ON). Several threads allocate, write, check and
// free blocks on several streams with record_stream and concurrent empty_cache; a block handed to
// two owners at once shows up as a pattern overwritten by the other owner. Memory history
// (backend/memory/cache_history.h) is checked the same way: the recorded actions of a deferred
// free, out-of-memory entries and observers, the ring's size, and snapshots taken while threads
// allocate and free with history on.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "backend/memory/device_cache.h"
#include "runtime/fault_injection.h"
#include "runtime/memory.h"
#include "runtime/stream_registry.h"
#include "runtime/testing/gate.h"
#include "runtime/tests/expect.h"

namespace rt = vdev::rt;
using vdev::backend::Block;
using vdev::backend::CacheSnapshot;
using vdev::backend::DeviceCache;
using vdev::backend::HistorySettings;
using vdev::backend::RecordContext;
using vdev::backend::TraceEntry;

static std::int64_t current(const c10::CachingAllocator::StatArray& a) { return a[0].current; }

static void fill(Block* b, std::size_t n, unsigned char v) {
  std::memset(rt::kernel_address(DeviceCache::info(b).ptr), v, n);
}

static bool holds(Block* b, std::size_t n, unsigned char v) {
  const auto* p = static_cast<const unsigned char*>(rt::kernel_address(DeviceCache::info(b).ptr));
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != v) return false;
  }
  return true;
}

static void test_reuse_follows_streams() {
  DeviceCache cache(1);
  rt::Stream& s0 = rt::default_stream(1);
  rt::Stream& s1 = rt::new_stream(1, 0);
  Block* a = cache.allocate(4096, s0);
  void* pa = DeviceCache::info(a).ptr;
  cache.free(a);
  Block* b = cache.allocate(4096, s0);  // same stream: reused at once
  EXPECT(DeviceCache::info(b).ptr == pa);
  Block* c = cache.allocate(4096, s1);  // another stream: never the same block
  EXPECT(DeviceCache::info(c).ptr != pa);
  // record_stream: held until the other stream has run what was queued at the free.
  auto gate = std::make_shared<rt::testing::Gate>();
  rt::testing::enqueue_gate(s1, gate);
  cache.record_stream(b, s1);
  cache.free(b);
  Block* d = cache.allocate(4096, s0);
  EXPECT(DeviceCache::info(d).ptr != pa);
  gate->open();
  s1.synchronize();
  Block* e = cache.allocate(4096, s0);
  EXPECT(DeviceCache::info(e).ptr == pa);
  for (Block* x : {c, d, e}) cache.free(x);
  cache.empty_cache();
  const auto st = cache.stats();
  EXPECT(current(st.allocated_bytes) == 0);
  EXPECT(current(st.reserved_bytes) == 0);
  EXPECT(current(st.inactive_split) == 0);
}

static void test_concurrent_owners_never_share_a_block() {
  DeviceCache cache(0);
  std::vector<rt::Stream*> streams = {&rt::default_stream(0), &rt::new_stream(0, 0),
                                      &rt::new_stream(0, -1)};
  std::atomic<bool> stop{false};
  std::thread cleaner([&] {
    while (!stop.load()) {
      cache.empty_cache();
      (void)cache.stats();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      struct Held {
        Block* b;
        std::size_t n;
        unsigned char v;
      };
      std::vector<Held> held;
      for (int i = 0; i < 1500; ++i) {
        rt::Stream& s = *streams[static_cast<std::size_t>(rng() % streams.size())];
        const std::size_t n = rng() % 3 == 0 ? 1 + rng() % (3 << 20) : 1 + rng() % 8192;
        Block* b = cache.allocate(n, s);
        const auto v = static_cast<unsigned char>(t * 16 + i % 16 + 1);
        fill(b, std::min<std::size_t>(n, 4096), v);
        if (rng() % 4 == 0) cache.record_stream(b, *streams[(rng() % streams.size())]);
        held.push_back({b, std::min<std::size_t>(n, 4096), v});
        if (held.size() > 8) {
          const std::size_t k = rng() % held.size();
          EXPECT(holds(held[k].b, held[k].n, held[k].v));
          cache.free(held[k].b);
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
        }
      }
      for (const Held& h : held) {
        EXPECT(holds(h.b, h.n, h.v));
        cache.free(h.b);
      }
    });
  }
  for (auto& th : threads) th.join();
  stop.store(true);
  cleaner.join();
  for (rt::Stream* s : streams) s->synchronize();
  cache.empty_cache();
  const auto st = cache.stats();
  EXPECT(current(st.allocation) == 0);
  EXPECT(current(st.allocated_bytes) == 0);
  EXPECT(current(st.requested_bytes) == 0);
  EXPECT(current(st.active) == 0);
  EXPECT(current(st.reserved_bytes) == 0);
  EXPECT(rt::memory_stats(0).allocated == 0);
}

static void test_out_of_memory_after_release_and_retry() {
  DeviceCache cache(1);
  rt::Stream& s = rt::default_stream(1);
  Block* a = cache.allocate(std::size_t{600} << 20, s);
  cache.free(a);                                         // cached: 600 MiB reserved
  Block* b = cache.allocate(std::size_t{700} << 20, s);  // fits only once the cache is released
  EXPECT(cache.stats().num_alloc_retries == 1);
  bool threw = false;
  try {
    cache.allocate(std::size_t{400} << 20, s);
  } catch (const c10::OutOfMemoryError& e) {
    threw = std::strstr(e.what(), "Tried to allocate 400.00 MiB") != nullptr;
  }
  EXPECT(threw);
  EXPECT(cache.stats().num_ooms == 1);
  cache.free(b);
  cache.empty_cache();
}

// An allocation that fails while a freed block waits for another stream's work (record_stream)
// waits for the device and gets that block's memory, as CUDA's retry frees its events first;
// empty_cache gives such a block back too. Whether the gate opens before the retry or during its
// wait, the allocation succeeds.
static void test_the_retry_and_empty_cache_reclaim_blocks_waiting_for_other_streams() {
  DeviceCache cache(1);
  rt::Stream& s0 = rt::default_stream(1);
  rt::Stream& s1 = rt::new_stream(1, 0);
  for (int round = 0; round < 2; ++round) {
    Block* big = cache.allocate(std::size_t{600} << 20, s0);
    auto gate = std::make_shared<rt::testing::Gate>();
    rt::testing::enqueue_gate(s1, gate);
    cache.record_stream(big, s1);
    cache.free(big);  // deferred until s1 passes the gate
    if (round == 0) {
      std::thread opener([&] { gate->open(); });
      Block* again = cache.allocate(std::size_t{600} << 20, s0);  // needs big's memory
      opener.join();
      cache.free(again);
    } else {
      gate->open();
      s1.synchronize();
      cache.empty_cache();
      EXPECT(current(cache.stats().reserved_bytes) == 0);
    }
  }
  s0.synchronize();
  cache.empty_cache();
  EXPECT(current(cache.stats().reserved_bytes) == 0);
}

// A stand-in for a gathered stack (torch's CapturedTraceback in the backend): the thread that
// gathered it.
struct TestContext : c10::GatheredContext {
  std::thread::id thread = std::this_thread::get_id();
};

static std::atomic<int> g_gathered{0};

static std::shared_ptr<c10::GatheredContext> gather_test_context() {
  ++g_gathered;
  return std::make_shared<TestContext>();
}

static HistorySettings history_on(std::size_t max_entries = 1 << 20) {
  HistorySettings h;
  h.enabled = true;
  h.when = RecordContext::ALL;
  h.gather = &gather_test_context;
  h.max_entries = max_entries;
  h.clear = true;
  return h;
}

// The newest `n` block actions (alloc, free_requested, free_completed) recorded at `ptr`.
static std::vector<TraceEntry::Action> actions_at(const CacheSnapshot& snap, void* ptr,
                                                  std::size_t n) {
  std::vector<TraceEntry::Action> out;
  for (const TraceEntry& e : snap.trace) {
    const bool block_action = e.action_ == TraceEntry::ALLOC ||
                              e.action_ == TraceEntry::FREE_REQUESTED ||
                              e.action_ == TraceEntry::FREE_COMPLETED;
    if (block_action && e.addr_ == reinterpret_cast<std::size_t>(ptr)) out.push_back(e.action_);
  }
  if (out.size() > n) out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(n));
  return out;
}

// The snapshot's segments add up to the statistics (what torch.vdev.memory._snapshot promises).
static void expect_snapshot_matches_stats(DeviceCache& cache) {
  const CacheSnapshot snap = cache.snapshot(false);
  const auto st = cache.stats();
  std::int64_t reserved = 0, allocated = 0, active = 0;
  for (const auto& seg : snap.segments) {
    std::size_t tiled = 0;
    for (const auto& b : seg.blocks) {
      tiled += b.size;
      if (b.allocated) allocated += static_cast<std::int64_t>(b.size);
      if (b.active) active += static_cast<std::int64_t>(b.size);
    }
    EXPECT(tiled == seg.total_size);
    reserved += static_cast<std::int64_t>(seg.total_size);
  }
  EXPECT(reserved == current(st.reserved_bytes));
  EXPECT(allocated == current(st.allocated_bytes));
  EXPECT(active == current(st.active_bytes));
  EXPECT(static_cast<std::int64_t>(snap.segments.size()) == current(st.segment));
}

static void test_history_of_a_deferred_free() {
  DeviceCache cache(1);
  rt::Stream& s0 = rt::default_stream(1);
  rt::Stream& s1 = rt::new_stream(1, 0);
  cache.record_history(history_on());
  Block* a = cache.allocate(1000, s0);
  void* pa = DeviceCache::info(a).ptr;
  cache.free(a);  // nothing else uses it: completed at once
  auto snap = cache.snapshot(true);
  EXPECT((actions_at(snap, pa, 3) == std::vector<TraceEntry::Action>{TraceEntry::ALLOC,
                                                                     TraceEntry::FREE_REQUESTED,
                                                                     TraceEntry::FREE_COMPLETED}));
  EXPECT(snap.trace.front().action_ == TraceEntry::SEGMENT_ALLOC);
  EXPECT(snap.trace.back().action_ == TraceEntry::SNAPSHOT);
  for (const TraceEntry& e : snap.trace) {
    if (e.action_ == TraceEntry::ALLOC) EXPECT(e.size_ == 1000 && e.context_ != nullptr);
    EXPECT(e.compile_context_ == "N/A");
  }

  Block* b = cache.allocate(4096, s0);
  void* pb = DeviceCache::info(b).ptr;
  auto gate = std::make_shared<rt::testing::Gate>();
  rt::testing::enqueue_gate(s1, gate);
  cache.record_stream(b, s1);
  cache.free(b);
  (void)cache.stats();  // looks at the deferred frees: b's must stay
  snap = cache.snapshot(true);
  EXPECT((actions_at(snap, pb, 2) ==
          std::vector<TraceEntry::Action>{TraceEntry::ALLOC, TraceEntry::FREE_REQUESTED}));
  bool pending = false;
  for (const auto& seg : snap.segments) {
    std::size_t addr = seg.address;
    for (const auto& blk : seg.blocks) {
      if (addr == reinterpret_cast<std::size_t>(pb)) {
        pending = !blk.allocated && blk.active && blk.requested_size == 4096;
      }
      addr += blk.size;
    }
  }
  EXPECT(pending);
  expect_snapshot_matches_stats(cache);
  gate->open();
  s1.synchronize();
  snap = cache.snapshot(true);
  EXPECT((actions_at(snap, pb, 3) == std::vector<TraceEntry::Action>{TraceEntry::ALLOC,
                                                                     TraceEntry::FREE_REQUESTED,
                                                                     TraceEntry::FREE_COMPLETED}));
  cache.empty_cache();
  snap = cache.snapshot(true);
  EXPECT(snap.segments.empty());
  int segment_frees = 0;
  for (const TraceEntry& e : snap.trace) segment_frees += e.action_ == TraceEntry::SEGMENT_FREE;
  EXPECT(segment_frees == 1);

  // Stopping drops the entries and gathers nothing more.
  HistorySettings off;
  cache.record_history(off);
  const int gathered = g_gathered.load();
  cache.free(cache.allocate(100, s0));
  EXPECT(g_gathered.load() == gathered);
  EXPECT(cache.snapshot(true).trace.empty());
  cache.empty_cache();
}

static void test_the_ring_keeps_the_newest_entries() {
  DeviceCache cache(1);
  rt::Stream& s0 = rt::default_stream(1);
  cache.record_history(history_on(3));
  std::vector<Block*> blocks;
  for (std::size_t i = 0; i < 5; ++i) blocks.push_back(cache.allocate(512 * (i + 1), s0));
  auto trace = cache.snapshot(true).trace;  // ... alloc 4, alloc 5, snapshot
  EXPECT(trace.size() == 3);
  EXPECT(trace[1].addr_ == reinterpret_cast<std::size_t>(DeviceCache::info(blocks[4]).ptr));
  HistorySettings more = history_on(10);
  more.clear = false;
  cache.record_history(more);  // growing keeps what is there, in order
  for (Block* b : blocks) cache.free(b);
  trace = cache.snapshot(true).trace;
  EXPECT(trace.size() == 10);
  EXPECT(trace.back().action_ == TraceEntry::SNAPSHOT);
  cache.record_history(HistorySettings{});
  cache.empty_cache();
}

static void test_out_of_memory_is_recorded_and_observed_without_the_lock() {
  DeviceCache cache(1);
  rt::Stream& s = rt::default_stream(1);
  cache.record_history(history_on());
  static DeviceCache* observed_cache = nullptr;
  static std::vector<std::size_t> seen;
  static bool oom_entry_seen = false;
  observed_cache = &cache;
  vdev::backend::attach_out_of_memory_observer(
      [](std::int64_t device, std::size_t requested, std::size_t allowed, std::size_t free) {
        if (observed_cache == nullptr) return;
        // A snapshot takes the cache's lock: the observer runs without it.
        const auto snap = observed_cache->snapshot(true);
        for (const TraceEntry& e : snap.trace) {
          oom_entry_seen |= e.action_ == TraceEntry::OOM && e.size_ == requested && e.addr_ == free;
        }
        seen = {static_cast<std::size_t>(device), requested, allowed, free};
      });
  Block* held = cache.allocate(std::size_t{600} << 20, s);
  bool threw = false;
  try {
    cache.allocate(std::size_t{500} << 20, s);
  } catch (const c10::OutOfMemoryError&) {
    threw = true;
  }
  observed_cache = nullptr;
  EXPECT(threw);
  EXPECT(oom_entry_seen);
  EXPECT(seen.size() == 4 && seen[0] == 1 && seen[1] == (std::size_t{500} << 20) &&
         seen[2] == (std::size_t{1} << 30) && seen[3] == (std::size_t{424} << 20));
  cache.free(held);
  cache.record_history(HistorySettings{});
  cache.empty_cache();
}

// An injected out-of-memory error (runtime/fault_injection.h, Fault::kDeviceAlloc) counts every
// request, cache hits included, raises the real error (its message, num_ooms) and leaves the cache
// as it was: nothing released or retried, nothing allocated; the next request succeeds.
static void test_an_injected_out_of_memory_counts_cache_hits_and_changes_nothing() {
  DeviceCache cache(1);
  rt::Stream& s = rt::default_stream(1);
  Block* kept = cache.allocate(std::size_t{3} << 20, s);
  cache.free(cache.allocate(4096, s));  // cached
  EXPECT(rt::arm_fault_after(rt::Fault::kDeviceAlloc, 1) == -1);
  Block* hit = cache.allocate(4096, s);  // request 1: served from the cache, and counted
  const auto before = cache.stats();
  bool threw = false;
  try {
    cache.allocate(std::size_t{5} << 20, s);  // request 2
  } catch (const c10::OutOfMemoryError& e) {
    threw = std::strstr(e.what(),
                        "vdev out of memory. Tried to allocate 5.00 MiB. vdev:1 has a "
                        "total capacity of 1.00 GiB") != nullptr;
  }
  EXPECT(threw);
  const auto after = cache.stats();
  EXPECT(after.num_ooms == before.num_ooms + 1);
  EXPECT(after.num_alloc_retries == before.num_alloc_retries);
  EXPECT(after.num_device_alloc == before.num_device_alloc);
  EXPECT(after.num_device_free == before.num_device_free);
  EXPECT(current(after.reserved_bytes) == current(before.reserved_bytes));
  EXPECT(current(after.allocated_bytes) == current(before.allocated_bytes));
  EXPECT(current(after.allocation) == current(before.allocation));
  expect_snapshot_matches_stats(cache);
  Block* again = cache.allocate(std::size_t{5} << 20, s);  // once only
  EXPECT(rt::arm_fault_after(rt::Fault::kDeviceAlloc, -1) == -1);
  cache.free(again);
  cache.free(hit);
  cache.free(kept);
  cache.empty_cache();
}

// `reclaim` runs without the lock before out of memory is declared; what it frees is used.
static Block* g_reclaimable = nullptr;
static DeviceCache* g_reclaim_cache = nullptr;

static bool reclaim_test_block() {
  if (g_reclaimable == nullptr) return false;
  g_reclaim_cache->free(g_reclaimable);
  g_reclaimable = nullptr;
  return true;
}

static void test_reclaim_is_tried_before_out_of_memory() {
  DeviceCache cache(1, &reclaim_test_block);
  g_reclaim_cache = &cache;
  rt::Stream& s = rt::default_stream(1);
  g_reclaimable = cache.allocate(std::size_t{600} << 20, s);
  Block* b = cache.allocate(std::size_t{600} << 20, s);  // fits once the held block is freed
  EXPECT(g_reclaimable == nullptr);
  EXPECT(cache.stats().num_ooms == 0);
  cache.free(b);
  cache.empty_cache();
}

// Threads allocate and free with record_stream while history records with stacks and another
// thread takes snapshots and empties the cache: under TSan this checks that recording is guarded
// by the cache's lock; afterwards every block's actions are in order.
static void test_history_under_concurrent_use() {
  DeviceCache cache(0);
  std::vector<rt::Stream*> streams = {&rt::default_stream(0), &rt::new_stream(0, 0)};
  cache.record_history(history_on());
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    while (!stop.load()) {
      // Taken while others allocate: each segment's blocks still tile it.
      for (const auto& seg : cache.snapshot(true).segments) {
        std::size_t tiled = 0;
        for (const auto& b : seg.blocks) tiled += b.size;
        EXPECT(tiled == seg.total_size);
      }
      cache.empty_cache();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t + 100));
      std::vector<Block*> held;
      for (int i = 0; i < 800; ++i) {
        rt::Stream& s = *streams[rng() % streams.size()];
        Block* b = cache.allocate(1 + rng() % (rng() % 4 == 0 ? (3 << 20) : 8192), s);
        if (rng() % 3 == 0) cache.record_stream(b, *streams[rng() % streams.size()]);
        held.push_back(b);
        if (held.size() > 6) {
          const std::size_t k = rng() % held.size();
          cache.free(held[k]);
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
        }
      }
      for (Block* b : held) cache.free(b);
    });
  }
  for (auto& th : threads) th.join();
  stop.store(true);
  watcher.join();
  for (rt::Stream* s : streams) s->synchronize();
  expect_snapshot_matches_stats(cache);
  const auto snap = cache.snapshot(true);
  // Per address: alloc, free_requested, free_completed, alloc, ...; segments alloc/free alternate.
  std::map<std::size_t, TraceEntry::Action> last, last_segment;
  bool ordered = true;
  for (const TraceEntry& e : snap.trace) {
    switch (e.action_) {
      case TraceEntry::ALLOC:
        ordered &= !last.count(e.addr_) || last[e.addr_] == TraceEntry::FREE_COMPLETED;
        last[e.addr_] = e.action_;
        break;
      case TraceEntry::FREE_REQUESTED:
        ordered &= last.count(e.addr_) && last[e.addr_] == TraceEntry::ALLOC;
        last[e.addr_] = e.action_;
        break;
      case TraceEntry::FREE_COMPLETED:
        ordered &= last.count(e.addr_) && last[e.addr_] == TraceEntry::FREE_REQUESTED;
        last[e.addr_] = e.action_;
        break;
      case TraceEntry::SEGMENT_ALLOC:
        ordered &=
            !last_segment.count(e.addr_) || last_segment[e.addr_] == TraceEntry::SEGMENT_FREE;
        last_segment[e.addr_] = e.action_;
        break;
      case TraceEntry::SEGMENT_FREE:
        ordered &=
            last_segment.count(e.addr_) && last_segment[e.addr_] == TraceEntry::SEGMENT_ALLOC;
        last_segment[e.addr_] = e.action_;
        break;
      default:
        break;
    }
  }
  EXPECT(ordered);
  for (const auto& [addr, action] : last) EXPECT(action == TraceEntry::FREE_COMPLETED);
  cache.record_history(HistorySettings{});
  cache.empty_cache();
  EXPECT(current(cache.stats().reserved_bytes) == 0);
}

int main() {
  setenv("VDEV_DEVICE_COUNT", "2", 1);
  setenv("VDEV_DEVICE_MEMORY", "1GiB", 1);
  test_reuse_follows_streams();
  test_concurrent_owners_never_share_a_block();
  test_out_of_memory_after_release_and_retry();
  test_the_retry_and_empty_cache_reclaim_blocks_waiting_for_other_streams();
  test_history_of_a_deferred_free();
  test_the_ring_keeps_the_newest_entries();
  test_out_of_memory_is_recorded_and_observed_without_the_lock();
  test_reclaim_is_tried_before_out_of_memory();
  test_an_injected_out_of_memory_counts_cache_hits_and_changes_nothing();
  test_history_under_concurrent_use();
  return report();
}
