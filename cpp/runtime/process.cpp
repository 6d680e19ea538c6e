#include "runtime/process.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "runtime/errors.h"

namespace vdev::rt {
namespace {

std::atomic<bool> g_initialised{false};
std::atomic<bool> g_bad_fork{false};
std::atomic<bool> g_stopping{false};
std::atomic<std::thread::id> g_exiting_thread{};
thread_local bool tls_worker = false;
std::array<std::atomic<void (*)() noexcept>, kMaxShutdownSteps> g_shutdown_steps{};
std::atomic<int> g_shutdown_step_count{0};

// Locks fork() must not copy held. Append-only and lock-free, so that registering (which can
// happen under another registered lock) never waits for a fork in progress.
struct ForkLocks {
  static constexpr std::size_t kCapacity = 8192;  // each stream registers two
  std::array<std::atomic<std::mutex*>, kCapacity> locks{};
  std::array<ForkLockLevel, kCapacity> levels{};  // written before locks[i] is published
  std::atomic<std::size_t> count{0};
  // The locks taken by the prepare handler; only the forking thread touches it (fork() runs its
  // handlers on one thread, and the interpreter's fork holds the GIL).
  std::array<std::mutex*, kCapacity> held{};
  std::size_t nheld = 0;
};

ForkLocks& fork_locks() {
  static ForkLocks* f = new ForkLocks;  // leaked: fork may happen during static destruction
  return *f;
}

void before_fork() {
  ForkLocks& f = fork_locks();
  const std::size_t n = std::min(f.count.load(std::memory_order_acquire), ForkLocks::kCapacity);
  f.nheld = 0;
  for (int level = 0; level < static_cast<int>(ForkLockLevel::kCount); ++level) {
    for (std::size_t i = 0; i < n; ++i) {
      std::mutex* mu = f.locks[i].load(std::memory_order_acquire);
      if (mu != nullptr && static_cast<int>(f.levels[i]) == level) {
        mu->lock();
        f.held[f.nheld++] = mu;
      }
    }
  }
}

void release_fork_locks() {
  ForkLocks& f = fork_locks();
  for (std::size_t i = f.nheld; i-- > 0;) f.held[i]->unlock();
  f.nheld = 0;
}

void after_fork_in_parent() { release_fork_locks(); }

void after_fork_in_child() {
  release_fork_locks();  // the child's only thread is the one that took them
  g_bad_fork.store(g_initialised.load());
}

void at_exit() { shutdown_workers(); }

// Installed before the first lock is registered and before initialisation, so no lock can be
// held across a fork without them.
void install_fork_handlers() noexcept {
  static const bool installed = [] {
    pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child);
    return true;
  }();
  (void)installed;
}

}  // namespace

void mark_initialised() noexcept {
  install_fork_handlers();
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(&at_exit); });
  g_initialised.store(true);
}

void register_fork_lock(std::mutex* mu, ForkLockLevel level) noexcept {
  install_fork_handlers();
  ForkLocks& f = fork_locks();
  const std::size_t i = f.count.fetch_add(1);
  if (i < ForkLocks::kCapacity) {
    f.levels[i] = level;
    f.locks[i].store(mu, std::memory_order_release);
  }
}

std::size_t registered_fork_lock_count() noexcept {
  return std::min(fork_locks().count.load(), ForkLocks::kCapacity);
}

std::mutex* registered_fork_lock(std::size_t i) noexcept {
  if (i >= registered_fork_lock_count()) return nullptr;
  return fork_locks().locks[i].load(std::memory_order_acquire);
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

void mark_worker_thread() noexcept { tls_worker = true; }

[[noreturn]] void park_forever() noexcept {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(24));
}

void park_if_stray_at_exit() noexcept {
  if (!stopping() || tls_worker) return;
  if (g_exiting_thread.load() == std::this_thread::get_id()) return;
  park_forever();
}

void register_shutdown_step(void (*step)() noexcept) noexcept {
  const int i = g_shutdown_step_count.fetch_add(1);
  if (i < kMaxShutdownSteps) {
    g_shutdown_steps[static_cast<std::size_t>(i)].store(step, std::memory_order_release);
  }
}

void shutdown_workers() noexcept {
  g_exiting_thread.store(std::this_thread::get_id());  // before stopping: strays compare with it
  if (g_stopping.exchange(true)) return;
  const int n = std::min(g_shutdown_step_count.load(), kMaxShutdownSteps);
  for (int i = 0; i < n; ++i) {
    // A step still being registered (its slot not yet stored) made nothing to stop yet.
    if (auto* step =
            g_shutdown_steps[static_cast<std::size_t>(i)].load(std::memory_order_acquire)) {
      step();
    }
  }
}

}  // namespace vdev::rt
