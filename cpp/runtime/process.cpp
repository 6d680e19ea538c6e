#include "runtime/process.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>

#include "runtime/errors.h"
#include "runtime/stream.h"

namespace vdev::rt {
namespace {

std::atomic<bool> g_initialised{false};
std::atomic<bool> g_bad_fork{false};
std::atomic<bool> g_stopping{false};

void on_fork_child() { g_bad_fork.store(g_initialised.load()); }

void at_exit() { shutdown_workers(std::chrono::milliseconds(2000)); }

}  // namespace

void mark_initialised() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(nullptr, nullptr, &on_fork_child);
    std::atexit(&at_exit);
  });
  g_initialised.store(true);
}

bool in_bad_fork() noexcept { return g_bad_fork.load(std::memory_order_relaxed); }

void check_not_forked(const char* fn) {
  if (in_bad_fork()) {
    fail<std::runtime_error>(fn,
                             "cannot re-initialise vdev in a forked subprocess; use the spawn "
                             "start method (multiprocessing.set_start_method('spawn'))");
  }
}

bool stopping() noexcept { return g_stopping.load(std::memory_order_relaxed); }

void shutdown_workers(std::chrono::milliseconds limit) noexcept {
  if (g_stopping.exchange(true)) return;
  stop_all_streams(limit);
}

}  // namespace vdev::rt
