// Standalone tests of libvdevrt (no torch, no Python), built with -DVDEV_BUILD_TESTS=ON. Their
// purpose is the sanitizer builds: ASan/UBSan for the memory table, TSan for the thread-local
// device state and the concurrent allocator. Exit code 0 means every check passed.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/config.h"
#include "runtime/device.h"
#include "runtime/errors.h"
#include "runtime/memory.h"

namespace rt = vdev::rt;

static int failures = 0;

#define EXPECT(cond)                                                         \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "%s:%d: FAILED %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                            \
    }                                                                        \
  } while (0)

template <typename E, typename F>
static bool throws(F&& f, const char* needle) {
  try {
    f();
  } catch (const E& e) {
    return std::string(e.what()).find(needle) != std::string::npos;
  } catch (...) {
    return false;
  }
  return false;
}

static void test_config_parsers() {
  EXPECT(rt::parse_device_count("3", "X") == 3);
  EXPECT(throws<std::invalid_argument>([] { rt::parse_device_count("0", "X"); }, "X='0'"));
  EXPECT(throws<std::invalid_argument>([] { rt::parse_device_count("65", "X"); }, "1..64"));
  EXPECT(rt::parse_memory_size("2GiB", "M") == (std::size_t{2} << 30));
  EXPECT(rt::parse_memory_size("5k", "M") == 5 * 1024);
  EXPECT(throws<std::invalid_argument>([] { rt::parse_memory_size("3Q", "M"); }, "M='3Q'"));
  EXPECT(throws<std::invalid_argument>([] { rt::parse_memory_size("99999999999T", "M"); }, "M="));
}

static void test_device_registry() {
  EXPECT(rt::device_count() == 2);
  EXPECT(rt::get_device() == 0);
  EXPECT(rt::exchange_device(1) == 0);
  EXPECT(rt::maybe_exchange_device(-1) == 1);
  EXPECT(rt::get_device() == 1);
  EXPECT(throws<std::out_of_range>([] { rt::set_device(2); }, "device index 2 out of range"));
  EXPECT(throws<std::invalid_argument>([] { rt::set_device(-1); }, "negative"));
  rt::unchecked_set_device(7);  // invalid: ignored, state stays valid
  EXPECT(rt::get_device() == 1);
  rt::set_device(0);
  EXPECT(rt::device_properties(1).name == "vdev virtual device 1");
}

// Each thread flips its own current device many times; none may see another's value.
static void test_current_device_is_thread_local() {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int i = 0; i < 20000; ++i) {
        const int want = (t + i) % 2;
        rt::set_device(want);
        if (rt::get_device() != want) ++wrong;
        if (rt::exchange_device(1 - want) != want) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT(wrong.load() == 0);
  EXPECT(rt::get_device() == 0);  // this thread never changed
}

static void test_memory_accounting_and_copies() {
  const std::size_t before = rt::memory_stats(1).allocated;
  void* p = rt::device_malloc(1, 1000);
  EXPECT(p != nullptr);
  EXPECT(reinterpret_cast<std::uintptr_t>(p) % rt::kDeviceAlignment == 0);
  EXPECT(rt::memory_stats(1).allocated == before + 1024);
  EXPECT(rt::pointer_device(static_cast<char*>(p) + 999) == 1);
  std::vector<unsigned char> in(1000), out(1000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7);
  rt::memcpy_host_to_device(p, in.data(), in.size());
  void* q = rt::device_malloc(0, 1000);
  rt::memcpy_device_to_device(q, p, 1000);
  rt::memcpy_device_to_host(out.data(), q, out.size());
  EXPECT(std::memcmp(in.data(), out.data(), in.size()) == 0);
  rt::device_free(p);
  rt::device_free(q);
  rt::device_free(reinterpret_cast<void*>(0x1234));  // not ours: ignored
  EXPECT(rt::memory_stats(1).allocated == before);
  EXPECT(rt::device_malloc(0, 0) == nullptr);
  const std::size_t cap = rt::config().device_memory;
  EXPECT(throws<rt::OutOfMemory>([cap] { rt::device_malloc(0, cap + 1); }, "out of memory"));
  EXPECT(rt::memory_stats(0).num_ooms >= 1);
}

// Concurrent allocate / look up / free from several threads: the table and the statistics stay
// consistent (TSan checks the locking; the final count checks the accounting).
static void test_concurrent_allocation() {
  const std::size_t before = rt::memory_stats(0).allocated + rt::memory_stats(1).allocated;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &wrong] {
      std::vector<void*> mine;
      for (int i = 0; i < 2000; ++i) {
        const int dev = (t + i) % 2;
        void* p = rt::device_malloc(dev, 64 + static_cast<std::size_t>(i % 7) * 300);
        if (rt::pointer_device(p) != dev) ++wrong;
        mine.push_back(p);
        if (mine.size() > 16) {
          rt::device_free(mine.front());
          mine.erase(mine.begin());
        }
      }
      for (void* p : mine) rt::device_free(p);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT(wrong.load() == 0);
  EXPECT(rt::memory_stats(0).allocated + rt::memory_stats(1).allocated == before);
}

int main() {
  setenv("VDEV_DEVICE_COUNT", "2", 1);
  setenv("VDEV_DEVICE_MEMORY", "64MiB", 1);
  test_config_parsers();
  test_device_registry();
  test_current_device_is_thread_local();
  test_memory_accounting_and_copies();
  test_concurrent_allocation();
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
  return failures ? 1 : 0;
}
