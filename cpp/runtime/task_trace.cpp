#include "runtime/task_trace.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>

namespace vdev::rt {
namespace {

std::atomic<TaskObserver*> g_observer{nullptr};
// Held shared by a worker while it is inside on_task, exclusively by set_task_observer while it
// swaps: the previous observer is never called once set_task_observer has returned.
std::shared_mutex g_calling;
thread_local std::uint64_t tls_correlation = 0;
std::atomic<std::uint32_t> g_next_launch{1};

}  // namespace

void set_task_observer(TaskObserver* observer) {
  const std::unique_lock<std::shared_mutex> lock(g_calling);
  g_observer.store(observer, std::memory_order_release);
}

bool task_tracing() noexcept { return g_observer.load(std::memory_order_relaxed) != nullptr; }

void set_launch_correlation(std::uint64_t id) noexcept { tls_correlation = id; }

std::uint64_t launch_correlation() noexcept { return tls_correlation; }

std::int64_t trace_clock_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::uint64_t trace_thread_id() noexcept {
  static thread_local const std::uint64_t id = static_cast<std::uint64_t>(syscall(SYS_gettid));
  return id;
}

std::uint32_t next_launch_id() noexcept {
  std::uint32_t id = g_next_launch.fetch_add(1, std::memory_order_relaxed);
  while (id == 0) id = g_next_launch.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void report_host_call(const char* name, int device, std::int64_t stream,
                      std::int64_t start_ns) noexcept {
  const std::shared_lock<std::shared_mutex> lock(g_calling);
  if (TaskObserver* o = g_observer.load(std::memory_order_acquire)) {
    o->on_host_call(HostCallRecord{name, device, stream, tls_correlation, start_ns,
                                   trace_clock_ns(), trace_thread_id()});
  }
}

void report_host_run(const char* name, int device, std::int64_t stream, TaskTag tag,
                     std::int64_t start_ns, bool launched) noexcept {
  const std::shared_lock<std::shared_mutex> lock(g_calling);
  if (TaskObserver* o = g_observer.load(std::memory_order_acquire)) {
    const std::int64_t end = trace_clock_ns();
    o->on_task(TaskRecord{name, device, stream, tag, tls_correlation,
                          launched ? next_launch_id() : 0, start_ns, start_ns, start_ns, end,
                          trace_thread_id()});
  }
}

namespace detail {

void report_task(const TaskRecord& record) noexcept {
  const std::shared_lock<std::shared_mutex> lock(g_calling);
  if (TaskObserver* o = g_observer.load(std::memory_order_acquire)) o->on_task(record);
}

}  // namespace detail
}  // namespace vdev::rt
