#include "backend/common/thread_policy.h"

#include <ATen/Parallel.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "runtime/config.h"
#include "runtime/machine_load.h"
#include "runtime/process.h"

// This thread's OpenMP and MKL thread counts, and the release of its team, resolved when the
// process loads: weak, so that a torch built without them (another parallel backend, another
// BLAS) leaves them null.
extern "C" void omp_set_num_threads(int) __attribute__((weak));
extern "C" int omp_pause_resource_all(int) __attribute__((weak));
extern "C" int MKL_Set_Num_Threads_Local(int) __attribute__((weak));
// Defined by LLVM's and Intel's OpenMP runtimes, not by libgomp (whose pause is per thread).
extern "C" void __kmpc_fork_call() __attribute__((weak));

namespace vdev::backend {

namespace {
TaskThreads limits(int host_running, int host_waiting) {
  auto narrow = [](int n) { return static_cast<std::int16_t>(std::clamp(n, 1, int{INT16_MAX})); };
  return {narrow(host_running), narrow(host_waiting)};
}
}  // namespace

TaskThreads task_intra_op_threads(const vdev::rt::TaskTag& tag) {
  // Read once: tasks are only queued on a device, which needs a valid configuration.
  static const vdev::rt::Config& c = vdev::rt::config();
  const int host = at::get_num_threads();  // torch.set_num_threads of the queueing thread
  if (c.device_threads_set) {
    const int fixed = std::min(host, c.device_threads);
    return limits(fixed, fixed);
  }
  const int all = std::min(host, vdev::rt::machine_cpus());
  const bool kernel = tag.kind == vdev::rt::TaskKind::kKernel;
  if (kernel && tag.elements >= kLargeTaskElements) return limits(all, all);
  const int running = std::min(host, c.device_threads);
  // Below ATen's grain size a kernel runs on one thread whatever its count: keeping the count
  // spares the worker a change of its OpenMP and MKL settings at each such task.
  return limits(running, kernel && tag.elements >= kParallelTaskElements ? all : running);
}

int task_threads_now(TaskThreads limits) {
  static const vdev::rt::Config& c = vdev::rt::config();
  if (c.device_threads_set) return limits.host_running;  // a fixed count
  // The waiters' count only when it matters: the host writes it at every wait.
  const int limit = limits.host_waiting != limits.host_running && vdev::rt::host_waiters() > 0
                        ? limits.host_waiting
                        : limits.host_running;
  // Workers running tasks at once share the cores (two streams' kernels overlap, each with part).
  const int share = vdev::rt::machine_cpus() / std::max(1, vdev::rt::busy_workers());
  return std::clamp(share, 1, std::max(1, limit));
}

void use_intra_op_threads(int threads) {
  // What this worker last set; -1 before its first task. at::get_num_threads() would also read
  // it, but costs more than this comparison on every task.
  thread_local int applied = -1;
  if (threads == applied || threads <= 0) return;
  if (omp_set_num_threads == nullptr) {  // not an OpenMP build: only ATen's own setter exists
    at::set_num_threads(threads);
  } else {
    // ATen's lazy per-thread set-up runs first, so that it never overrides what is set here.
    if (applied == -1) (void)at::get_num_threads();
    omp_set_num_threads(threads);
    if (MKL_Set_Num_Threads_Local != nullptr) MKL_Set_Num_Threads_Local(threads);
  }
  applied = threads;
}

namespace {
std::atomic<bool> g_forked_child{false};
std::atomic<std::uint64_t> g_releases{0};
void note_forked_child() { g_forked_child.store(true, std::memory_order_relaxed); }
}  // namespace

void release_host_team() noexcept {
  // libgomp's pause frees the calling thread's pool only; LLVM's and Intel's pause every team.
  if (omp_pause_resource_all == nullptr || __kmpc_fork_call != nullptr) return;
  // A forked child holds the parent's pool record without its threads: the pause would wait
  // for them for ever. At exit, the pool's threads would exit during static destruction.
  if (g_forked_child.load(std::memory_order_relaxed) || vdev::rt::stopping()) return;
  constexpr int kOmpPauseSoft = 1;  // omp_pause_soft: the threads go, the settings stay
  g_releases.fetch_add(1, std::memory_order_relaxed);
  (void)omp_pause_resource_all(kOmpPauseSoft);
}

std::uint64_t host_team_releases() noexcept { return g_releases.load(std::memory_order_relaxed); }

namespace {
// A host thread that starts waiting for the device gives its team back (runtime/machine_load.h).
const bool g_hooked = (vdev::rt::set_host_wait_hook(&release_host_team), true);
// Any fork: the child must never pause (above), whether or not vdev was initialised before.
const bool g_atfork = (pthread_atfork(nullptr, nullptr, &note_forked_child) == 0);
}  // namespace

}  // namespace vdev::backend
