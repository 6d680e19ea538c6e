#include "runtime/testing/core_latency.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace vdev::rt::testing {

double cache_line_round_trip_ns(std::int64_t iterations, int rounds) {
  if (iterations < 1 || rounds < 1) {
    throw std::invalid_argument("cache_line_round_trip_ns: iterations and rounds must be >= 1");
  }
  std::vector<double> means;
  for (int r = 0; r < rounds; ++r) {
    alignas(64) std::atomic<std::int64_t> counter{0};
    std::thread other([&] {  // answers every odd value with the next even one
      for (std::int64_t i = 1; i < 2 * iterations; i += 2) {
        while (counter.load(std::memory_order_acquire) != i) {
        }
        counter.store(i + 1, std::memory_order_release);
      }
    });
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < 2 * iterations; i += 2) {
      counter.store(i + 1, std::memory_order_release);
      while (counter.load(std::memory_order_acquire) != i + 2) {
      }
    }
    const auto end = std::chrono::steady_clock::now();
    other.join();
    means.push_back(std::chrono::duration<double, std::nano>(end - start).count() /
                    static_cast<double>(iterations));
  }
  std::sort(means.begin(), means.end());
  return means[means.size() / 2];
}

}  // namespace vdev::rt::testing
