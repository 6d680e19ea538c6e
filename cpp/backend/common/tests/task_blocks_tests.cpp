// Stress test of the task blocks (backend/common/task_blocks.h), built with the sanitizers like the
// caching allocator's (VDEV_BUILD_CACHE_TESTS): three host threads take blocks of many sizes and
// fill them, one worker checks each block's bytes and gives it back, as stream workers do. Any
// block handed out twice, or corrupted in the lists, fails the check; TSan sees the lists' races.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "backend/common/task_blocks.h"

namespace {

std::mutex mu;
std::deque<std::pair<void*, std::size_t>> queued;
std::atomic<bool> hosts_done{false};

void worker() {
  for (;;) {
    std::pair<void*, std::size_t> b{nullptr, 0};
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!queued.empty()) {
        b = queued.front();
        queued.pop_front();
      } else if (hosts_done.load()) {
        return;
      }
    }
    if (b.first == nullptr) continue;
    const auto* bytes = static_cast<const unsigned char*>(b.first);
    for (std::size_t i = 0; i < b.second; ++i) {
      if (bytes[i] != static_cast<unsigned char>(b.second)) {
        std::printf("FAIL: block of %zu bytes changed while queued\n", b.second);
        std::abort();
      }
    }
    vdev::backend::give_task_block(b.first, b.second);
  }
}

}  // namespace

int main() {
  std::thread w(worker);
  std::vector<std::thread> hosts;
  for (int h = 0; h < 3; ++h) {
    hosts.emplace_back([h] {
      for (int i = 0; i < 100000; ++i) {
        const std::size_t size = 1 + static_cast<std::size_t>(i * 37 + h * 101) % 6000;
        void* block = vdev::backend::take_task_block(size);
        std::memset(block, static_cast<unsigned char>(size), size);
        std::lock_guard<std::mutex> lock(mu);
        queued.emplace_back(block, size);
      }
    });
  }
  for (std::thread& t : hosts) t.join();
  hosts_done = true;
  w.join();
  std::printf("OK\n");
  return 0;
}
