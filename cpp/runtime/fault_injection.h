// Fault injection: makes a runtime operation fail as it fails on a machine short of a resource, so
// that a program's handling of it (and vdev's own) can be exercised deterministically.
//
// Fault points: kWorkerStart, a stream's worker thread cannot be created (the enqueue that needed
// it raises, and nothing is queued). Later fault points (out-of-memory injection) join this list.
//
// Thread rules: lock-free; any thread. An injected fault is consumed by the first operation that
// reaches its point, on whichever thread.
#pragma once

#include "runtime/export.h"

namespace vdev::rt {

enum class Fault : int { kWorkerStart = 0, kCount };

// The next `count` operations that reach fault point `f` fail (adds to what is pending).
VDEV_RT_API void inject_fault(Fault f, int count = 1) noexcept;

// For the runtime, at the fault point: consumes one pending fault of `f`; whether there was one.
bool take_injected_fault(Fault f) noexcept;

}  // namespace vdev::rt
