// A measure of the machine, for benchmarks: how long one cache line takes to go from this core to
// another and back (two threads hand a counter to each other). On a virtual machine it changes
// with where the hypervisor places the virtual CPUs (this project's 2-vCPU VM: 55-70 ns most of
// the time, ~320 ns in phases of seconds to minutes), and everything that hands work from the host
// thread to a stream worker costs a few such trips: benchmarks record it next to their figures.
// In the testing library (libvdevrt_testing), so the runtime library exports none of it.
//
// Thread rules: safe from any thread; starts and joins one thread per call.
#pragma once

#include <cstdint>

#define VDEV_RT_TESTING_API __attribute__((visibility("default")))

namespace vdev::rt::testing {

// The median over `rounds` of the mean round trip of `iterations` hand-offs, in nanoseconds.
VDEV_RT_TESTING_API double cache_line_round_trip_ns(std::int64_t iterations, int rounds);

}  // namespace vdev::rt::testing
