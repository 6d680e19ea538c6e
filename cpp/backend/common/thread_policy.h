// How many intra-op (OpenMP/MKL) threads a device kernel runs with, and keeping libgomp's spin
// throttle off so that those threads hand work to each other as fast as on CPU.
//
// The policy (docs/architecture.md, "Cores"): a kernel whose size hint (TaskTag::elements: the
// most elements of one tensor it touches; for a matrix product or a convolution its multiply-adds
// / kMultiplyAddsPerElement if more, see executor/size_hint.h) reaches
// kLargeTaskElements (milliseconds of work: the host thread that queued it will wait for it, or
// for what comes after it, before it ends) gets every core; a smaller one gets the cores minus one
// while every host thread runs, so that the host thread, which runs ahead queueing work, keeps a
// core, and every core if it starts while a host thread waits for the device
// (runtime/machine_load.h's host_waiters: then the host needs none) and reaches
// kParallelTaskElements. All are capped by the queueing thread's torch.get_num_threads(), and
// shared among the stream workers running tasks at the moment one starts. VDEV_DEVICE_THREADS
// overrides it: a fixed count (capped the same way).
//
// Why the host's idle team is released (release_host_team): libgomp spins ~300,000 pauses
// (milliseconds) at each barrier, unless the process's pooled OpenMP threads outnumber the
// cores; then every team in the process sleeps in the kernel at each barrier instead, and every
// parallel region pays two wake-ups (measured: a small MLP's training step 2.9 ms instead of
// 1.9). The host thread's team, idle while the device computes, is what tips the count, so the
// host thread gives it back to libgomp (omp_pause_resource_all) when it waits for the device and
// before it queues a large kernel; its next CPU parallel region makes a new one (~30 us).
//
// Thread rules: task_intra_op_threads and release_host_team run on the queueing (host) thread;
// task_threads_now and use_intra_op_threads on the stream worker that runs the task.
#pragma once

#include <ATen/core/TensorBase.h>

#include <cstdint>
#include <initializer_list>

#include "backend/common/export.h"
#include "runtime/task_trace.h"

namespace vdev::backend {

// A kernel whose size hint reaches this gets every core, whatever the host threads do: a few
// milliseconds of work on one core (4M elements of an element-wise kernel, 64M multiply-adds of a
// matrix product: 256x512 by 512x512). Below it a kernel that starts while the host runs leaves
// the host its core: measured on two cores, paired in one process, with 2^18 here the host
// thread, sharing its core with the kernel's team and the team's spinning helper, queued more
// slowly than the device computed, and the device idled between its kernels (the compiled MLP's
// 64x512 by 512x512 products, 2^20; a small CNN's forward convolutions, 2^21, whose backward
// ones reach 2^22). See docs/architecture.md.
inline constexpr std::uint64_t kLargeTaskElements = std::uint64_t{1} << 22;

// A smaller kernel whose size hint reaches this (ATen's grain size, below which its parallel
// loops run on one thread) gets every core while a host thread waits for the device.
inline constexpr std::uint64_t kParallelTaskElements = 32768;

// Multiply-adds of a matrix product or a convolution worth one element of an element-wise
// kernel, for the size hint: MKL's and oneDNN's vectorised loops do some 16-32 per cycle,
// element-wise kernels about one element.
inline constexpr std::uint64_t kMultiplyAddsPerElement = 16;

// The most intra-op threads of a task, by what the host threads do when it starts.
struct TaskThreads {
  std::int16_t host_running;  // while every host thread runs (queues work, runs Python)
  std::int16_t host_waiting;  // while a host thread waits for the device
};

// The most intra-op threads of a task queued now by the calling thread with `tag`. Exported
// because emplace_launch, inlined into its callers, calls it.
VDEV_BACKEND_API TaskThreads task_intra_op_threads(const vdev::rt::TaskTag& tag = {});

// The threads a task with `limits` runs with if it starts now, on its worker: its limit for what
// the host threads do now, and its share of the cores among the workers running tasks.
VDEV_BACKEND_API int task_threads_now(TaskThreads limits);

// Makes the calling worker use `threads` intra-op threads (a no-op when it already does). Sets
// only this thread's OpenMP and MKL counts: at::set_num_threads would also change the process
// default that threads started later take, and torch's shared thread pool.
VDEV_BACKEND_API void use_intra_op_threads(int threads);

// Gives the calling thread's idle OpenMP team back to libgomp (nothing when it has none, or
// inside a parallel region). Called on the host thread; see above. Does nothing under another
// OpenMP runtime (LLVM's and Intel's pause is process-wide), in a forked child (the pool's
// threads did not survive the fork: the pause would wait for them for ever), or at exit.
VDEV_BACKEND_API void release_host_team() noexcept;

// How many times release_host_team gave a team back (or found none), for tests.
VDEV_BACKEND_API std::uint64_t host_team_releases() noexcept;

}  // namespace vdev::backend
