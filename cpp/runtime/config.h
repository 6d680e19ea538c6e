// Process configuration of the simulated driver, read once from the environment.
//
//   VDEV_DEVICE_COUNT   number of devices, an integer in 1..kMaxDevices (default 2)
//   VDEV_DEVICE_MEMORY  capacity of each device: bytes ("1073741824") or a size with a unit
//                       ("4GiB", "512MiB", "2G"; units K/M/G/T, with or without "iB"/"B", all
//                       binary) (default 4GiB)
//   VDEV_LAUNCH_BLOCKING "1" makes every task complete before enqueue returns, so errors point at
//                       the operation that caused them (like CUDA_LAUNCH_BLOCKING); "0" or unset:
//                       asynchronous
//   VDEV_PROFILE        what the simulated device is: a built-in profile name (default, sm75,
//                       sm80, sm90, mps) or the path of a JSON profile (runtime/profile.h); its
//                       memory is the default of VDEV_DEVICE_MEMORY
//   VDEV_DEVICE_THREADS intra-op threads each stream worker runs its kernels with, an integer in
//                       1..kMaxDeviceThreads (default: the cores this process may use minus one,
//                       at least 1: one core stays with the host thread, which runs ahead of the
//                       device as a GPU's host does)
//
// The environment is read on the first call to config() and never again. A malformed value does
// not throw at load time: config() throws std::runtime_error naming the variable and the value on
// every call, so that import stays safe and the first real use reports the cause.
//
// Thread rules: config() is safe to call from any thread (function-local static initialisation).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "runtime/export.h"
#include "runtime/profile.h"

namespace vdev::rt {

inline constexpr int kMaxDevices = 64;
inline constexpr int kDefaultDeviceCount = 2;
inline constexpr std::size_t kDefaultDeviceMemory = std::size_t{4} << 30;
inline constexpr int kMaxDeviceThreads = 1024;

struct Config {
  int device_count;
  std::size_t device_memory;  // capacity of each device, in bytes
  bool launch_blocking;       // VDEV_LAUNCH_BLOCKING=1: every enqueue waits for its task
  int device_threads;         // intra-op threads of a stream worker's kernels
  Profile profile;            // VDEV_PROFILE: what the device is (runtime/profile.h)
};

// The validated configuration; throws std::runtime_error if the environment is malformed.
VDEV_RT_API const Config& config();

// The configuration error, if any, without throwing.
VDEV_RT_API const std::optional<std::string>& config_error() noexcept;

// Parsers, exposed for tests. They throw std::invalid_argument naming `what` and the value.
VDEV_RT_API int parse_device_count(const std::string& text, const char* what);
VDEV_RT_API std::size_t parse_memory_size(const std::string& text, const char* what);
VDEV_RT_API int parse_thread_count(const std::string& text, const char* what);

// The default of VDEV_DEVICE_THREADS: the CPUs in this process's affinity mask minus one, at
// least 1.
VDEV_RT_API int default_device_threads() noexcept;

}  // namespace vdev::rt
