// Fault injection: makes an operation fail as it fails on a machine short of a resource, so that a
// program's handling of it (and vdev's own) can be exercised deterministically.
//
// Fault points (who asks at each):
//   kWorkerStart   a stream's worker thread cannot be created (runtime/stream.cpp: the enqueue
//                  that needed it raises, and nothing is queued).
//   kDeviceAlloc   a device allocation runs out of memory. The runtime itself never asks: the
//                  backend's caching allocator does, at every request it serves (cache hits
//                  included), and raises its out-of-memory error (VDEV_OOM_AFTER,
//                  torch.vdev.memory.inject_oom).
//   kCollective    a collective fails (VDEV_DIST_FAULT): the backend's collectives backend asks
//                  at every collective it queues, on the rank the variable names.
//
// Two ways to inject, which add up: inject_fault() makes the next `count` operations at the point
// fail; arm_fault_after() lets the next `after` operations pass and makes the one after them fail,
// once (a countdown; exchanged, so that a scope can put back the countdown it found).
//
// Thread rules: lock-free; any thread. An injected fault is consumed by the first operation that
// reaches its point, on whichever thread: however many threads race, a countdown fails exactly one
// operation. With nothing injected, asking costs two relaxed loads.
#pragma once

#include <cstdint>

#include "runtime/export.h"

namespace vdev::rt {

enum class Fault : int { kWorkerStart = 0, kDeviceAlloc, kCollective, kCount };

// The next `count` operations that reach fault point `f` fail (adds to what is pending).
VDEV_RT_API void inject_fault(Fault f, int count = 1) noexcept;

// Arms the countdown of `f`: the next `after` operations that reach it pass, the one after them
// fails, and the countdown is then disarmed. `after` < 0 disarms it. Returns the countdown it
// replaces: the operations that were still to pass, or -1 if none was armed (or it had fired).
VDEV_RT_API std::int64_t arm_fault_after(Fault f, std::int64_t after) noexcept;

// At the fault point: whether this operation fails (consuming the injected fault if so).
VDEV_RT_API bool take_injected_fault(Fault f) noexcept;
// Whether a fault is armed or pending at `f`, taking no step: the loads take_injected_fault makes
// when none is (benchmarks/bench_hooks.py times them).
VDEV_RT_API bool injected_fault_armed(Fault f) noexcept;

}  // namespace vdev::rt
