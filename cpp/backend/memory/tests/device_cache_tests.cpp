// Tests of the caching allocator's core (backend/device_cache.cpp) without libtorch: it needs only
// c10's headers and library and the runtime, so it builds with the sanitizers (-DVDEV_USE_TSAN /
// -DVDEV_USE_ASAN with -DVDEV_BUILD_CACHE_TESTS=ON). Several threads allocate, write, check and
// free blocks on several streams with record_stream and concurrent empty_cache; a block handed to
// two owners at once shows up as a pattern overwritten by the other owner.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "backend/memory/device_cache.h"
#include "runtime/memory.h"
#include "runtime/stream_registry.h"
#include "runtime/testing/gate.h"
#include "runtime/tests/expect.h"

namespace rt = vdev::rt;
using vdev::backend::Block;
using vdev::backend::DeviceCache;

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

int main() {
  setenv("VDEV_DEVICE_COUNT", "2", 1);
  setenv("VDEV_DEVICE_MEMORY", "1GiB", 1);
  test_reuse_follows_streams();
  test_concurrent_owners_never_share_a_block();
  test_out_of_memory_after_release_and_retry();
  test_the_retry_and_empty_cache_reclaim_blocks_waiting_for_other_streams();
  return report();
}
