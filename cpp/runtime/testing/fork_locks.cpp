#include "runtime/testing/fork_locks.h"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "runtime/process.h"

namespace vdev::rt::testing {
namespace {

// Holders wait for the next fork to begin. Leaked: holder threads may outlive static destruction.
struct ForkStart {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t forks = 0;  // guarded by mu
};
ForkStart& fork_start() {
  static ForkStart* f = new ForkStart;
  return *f;
}

// Registered after the runtime's fork handlers (they exist once a lock is registered), so it runs
// before the runtime's prepare handler (pthread_atfork runs prepare handlers in reverse order).
void release_holders_before_fork() {
  ForkStart& f = fork_start();
  {
    const std::lock_guard<std::mutex> lock(f.mu);
    ++f.forks;
  }
  f.cv.notify_all();
}

void install_fork_start_handler() {
  static const bool installed = [] {
    pthread_atfork(&release_holders_before_fork, nullptr, nullptr);
    return true;
  }();
  (void)installed;
}

}  // namespace

std::size_t fork_lock_count() noexcept { return registered_fork_lock_count(); }

void hold_fork_lock(std::size_t i, int ms) {
  if (i >= fork_lock_count()) {
    throw std::out_of_range("[hold_fork_lock] lock " + std::to_string(i) +
                            " out of range: " + std::to_string(fork_lock_count()) + " registered");
  }
  std::mutex* mu = registered_fork_lock(i);
  if (mu == nullptr) return;
  install_fork_start_handler();
  ForkStart& f = fork_start();
  std::uint64_t forks_before;
  {
    const std::lock_guard<std::mutex> lock(f.mu);
    forks_before = f.forks;
  }
  std::promise<void> locked;
  std::future<void> is_locked = locked.get_future();
  std::thread([mu, ms, forks_before, &f, locked = std::move(locked)]() mutable {
    std::lock_guard<std::mutex> hold(*mu);
    locked.set_value();
    std::unique_lock<std::mutex> lock(f.mu);
    f.cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return f.forks != forks_before; });
  }).detach();
  is_locked.wait();
}

std::size_t held_fork_locks() noexcept {
  std::size_t held = 0;
  for (std::size_t i = 0; i < fork_lock_count(); ++i) {
    std::mutex* mu = registered_fork_lock(i);
    if (mu == nullptr) continue;
    if (mu->try_lock()) {
      mu->unlock();
    } else {
      ++held;
    }
  }
  return held;
}

}  // namespace vdev::rt::testing
