// Test-only probes of the fork handler's registered locks (runtime/process.h), in the testing
// library (libvdevrt_testing), so the runtime library exports none of them.
//
// Thread rules: safe from any thread.
#pragma once

#include <cstddef>

#define VDEV_RT_TESTING_API __attribute__((visibility("default")))

namespace vdev::rt::testing {

// The number of registered fork locks.
VDEV_RT_TESTING_API std::size_t fork_lock_count() noexcept;
// Returns once a background thread holds registered lock `i`. It releases it when the next fork()
// begins (this library's prepare handler runs before the runtime's, which then takes the lock),
// or after `ms` at the latest, so a test that never forks does not keep it. std::out_of_range for
// an index past the count.
VDEV_RT_TESTING_API void hold_fork_lock(std::size_t i, int ms);
// How many registered locks are held by someone (try_lock fails): 0 in a child the fork handler
// prepared, whatever the parent's threads were doing.
VDEV_RT_TESTING_API std::size_t held_fork_locks() noexcept;

}  // namespace vdev::rt::testing
