// The registry of the simulated driver's streams: which streams each device has, which one is
// current, device-wide synchronization and idleness, and stopping every worker at exit.
//
// Identity: a stream is (device, id). Per device, id 0 is the default stream, ids 1..32 the pool of
// priority 0 and ids 33..64 the pool of priority -1 (handed out round-robin, as CUDA's pool), and
// ids from 65 up are streams made by new_stream. Priorities follow CUDA's convention (a lower value
// is a higher priority) and range over kHighestStreamPriority..kLowestStreamPriority; values
// outside are clamped. Priorities are recorded and reported; the simulated device does not
// preempt, so they do not change the order in which streams run.
//
// Exit: the first use of the registry registers a shutdown step with runtime/process.h that
// stops every worker, waits for the tasks they are running and prints the errors no synchronize
// reported.
//
// Ownership: streams are created on first use and never destroyed (runtime/stream.h); the
// references returned stay valid for the life of the process.
// Thread rules: every function is safe from any thread. The current stream is thread-local and
// per device; it starts as the default stream.
#pragma once

#include <chrono>
#include <cstdint>

#include "runtime/export.h"
#include "runtime/stream.h"

namespace vdev::rt {

inline constexpr int kStreamsPerPool = 32;
inline constexpr int kLowestStreamPriority = 0;
inline constexpr int kHighestStreamPriority = -1;
inline constexpr int kMaxStreamsPerDevice = 1024;
inline constexpr std::chrono::seconds kExitReportEvery{5};

// Throw std::out_of_range / std::invalid_argument for a bad device index.
VDEV_RT_API Stream& default_stream(int device);
VDEV_RT_API Stream& pool_stream(int device, bool high_priority);
// A new stream of its own; std::runtime_error once a device has kMaxStreamsPerDevice streams.
VDEV_RT_API Stream& new_stream(int device, int priority);
// The stream with this id; std::invalid_argument if no such stream exists.
VDEV_RT_API Stream& stream_from_id(int device, std::int64_t id);

VDEV_RT_API Stream& current_stream(int device);
// Makes `s` current for its device on the calling thread; returns the previous current stream of
// that device. Does not change the current device.
VDEV_RT_API Stream& exchange_current_stream(Stream& s);

// Waits for every stream of `device` that has ever been used, then throws the first pending error.
VDEV_RT_API void synchronize_device(int device);
// Waits for every stream of `device` without throwing (errors stay pending for the next
// synchronize). For allocators that must know no queued work uses memory they release.
VDEV_RT_API void wait_device_idle(int device) noexcept;
// The same for a caller holding a lock others need at exit (the device caches): it never parks a
// thread. Returns false when the wait ended because the runtime is stopping (queued work is then
// abandoned, so the device is not idle): the caller must give nothing back, release its lock and
// then call park_if_stray_at_exit().
VDEV_RT_API bool wait_device_idle_unless_stopping(int device) noexcept;

}  // namespace vdev::rt
