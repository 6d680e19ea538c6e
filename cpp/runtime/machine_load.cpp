#include "runtime/machine_load.h"

#include <sched.h>

#include <atomic>
#include <thread>

namespace vdev::rt {

namespace {
std::atomic<int> g_busy_workers{0};
std::atomic<void (*)() noexcept> g_host_wait_hook{nullptr};
std::atomic<int> g_host_waiters{0};
}  // namespace

void set_host_wait_hook(void (*hook)() noexcept) noexcept { g_host_wait_hook.store(hook); }

void note_host_wait() noexcept {
  // The hook first: it gives the host's idle OpenMP team back, which must be gone before a
  // worker, seeing this thread wait, gives a kernel every core (thread_policy.h).
  if (auto hook = g_host_wait_hook.load(std::memory_order_relaxed)) hook();
  g_host_waiters.fetch_add(1, std::memory_order_relaxed);
}

int host_waiters() noexcept { return g_host_waiters.load(std::memory_order_relaxed); }

void note_host_wait_end() noexcept { g_host_waiters.fetch_sub(1, std::memory_order_relaxed); }

int busy_workers() noexcept { return g_busy_workers.load(std::memory_order_relaxed); }

void note_worker_busy(bool busy) noexcept {
  g_busy_workers.fetch_add(busy ? 1 : -1, std::memory_order_relaxed);
}

int machine_cpus() noexcept {
  static const int cpus = [] {
    int n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
    if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
    return n > 0 ? n : 1;
  }();
  return cpus;
}

}  // namespace vdev::rt
