// Process configuration of the simulated driver, read once from the environment.
//
//   VDEV_DEVICE_COUNT   number of devices, an integer in 1..kMaxDevices (default 2)
//   VDEV_DEVICE_MEMORY  capacity of each device: bytes ("1073741824") or a size with a unit
//                       ("4GiB", "512MiB", "2G"; units K/M/G/T, with or without "iB"/"B", all
//                       binary) (default 4GiB)
//   VDEV_LAUNCH_BLOCKING "1" makes every task complete before enqueue returns, so errors point at
//                       the operation that caused them (like CUDA_LAUNCH_BLOCKING); "0" or unset:
//                       asynchronous
//   VDEV_STICKY_ASSERTS "0" lets a device recover from a device-side assert (the failure is
//                       reported once with its kernel's error type); "1" or unset: a device-side
//                       assert makes the device unusable until the process ends, as on CUDA
//                       (runtime/device_assert.h)
//   VDEV_PROFILE        what the simulated device is: a built-in profile name (default, sm75,
//                       sm80, sm90, mps) or the path of a JSON profile
//                       (runtime/capability_profile.h); its memory is the default of
//                       VDEV_DEVICE_MEMORY
//   VDEV_DEVICE_THREADS a fixed count of intra-op threads for every kernel of a stream worker, an
//                       integer in 1..kMaxDeviceThreads; unset: the backend's thread policy
//                       (backend/common/thread_policy.h), and device_threads holds the cores
//                       this process may use minus one (at least 1), a small kernel's count
//   VDEV_SANITIZER      the bug finders on from the start (backend/sanitizer/): a comma-separated
//                       list of streams, init, poison, and warn (report and go on instead of
//                       raising); empty or unset: none
//   VDEV_OOM_AFTER      N, an integer in 0..2^63-1: the device allocation after the first N raises
//                       out of memory, once (the backend's caching allocator arms
//                       Fault::kDeviceAlloc with it, runtime/fault_injection.h); unset or empty:
//                       none
//   VDEV_DIST_FAULT     RANK:N:abort|hang: the N-th collective (counted from 1) of the process of
//                       global rank RANK exits the process (abort) or never arrives (hang); the
//                       backend's collectives backend acts on it; unset or empty: none
//
// The environment is read on the first call to config() and never again. A malformed value does
// not throw at load time: config() throws std::runtime_error naming the variable and the value on
// every call, so that import stays safe and the first real use reports the cause. Every message
// names the variable (for a profile's field, VDEV_PROFILE, the file and the field) and what is
// valid; bytes that are not UTF-8 in a value are shown as \xNN (runtime/errors.h).
//
// Thread rules: config() is safe to call from any thread (function-local static initialisation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "runtime/capability_profile.h"
#include "runtime/export.h"

namespace vdev::rt {

inline constexpr int kMaxDevices = 64;
inline constexpr int kDefaultDeviceCount = 2;
inline constexpr std::size_t kDefaultDeviceMemory = std::size_t{4} << 30;
inline constexpr int kMaxDeviceThreads = 1024;

// VDEV_DIST_FAULT: which collective of which rank fails, and how.
enum class DistFaultMode { kAbort, kHang };
struct DistFault {
  int rank;          // the global rank (in the default process group)
  std::int64_t nth;  // that process's collective that fails, counted from 1
  DistFaultMode mode;
};

struct Config {
  int device_count;
  std::size_t device_memory;        // capacity of each device, in bytes
  bool launch_blocking;             // VDEV_LAUNCH_BLOCKING=1: every enqueue waits for its task
  int device_threads;               // intra-op threads of a stream worker's kernels (see below)
  bool device_threads_set = false;  // VDEV_DEVICE_THREADS was given: a fixed count, no policy
  CapabilityProfile profile;   // VDEV_PROFILE: what the device is (runtime/capability_profile.h)
  unsigned sanitizer = 0;      // VDEV_SANITIZER: SanitizerFlag bits
  bool sticky_asserts = true;  // VDEV_STICKY_ASSERTS (default 1): runtime/device_assert.h

  // Injected faults (runtime/fault_injection.h).
  std::int64_t oom_after = -1;            // VDEV_OOM_AFTER (-1: unset)
  std::optional<DistFault> dist_fault{};  // VDEV_DIST_FAULT
};

// The bug finders VDEV_SANITIZER names (backend/sanitizer/settings.h).
enum SanitizerFlag : unsigned {
  kSanitizeStreams = 1U,  // "streams": unordered accesses of two streams
  kSanitizeInit = 2U,     // "init": reads of bytes never written since allocation
  kSanitizePoison = 4U,   // "poison": fresh and freed blocks filled with 0xFF bytes (NaN)
  kSanitizeWarn = 8U,     // "warn": report and go on
};

// The validated configuration; throws std::runtime_error if the environment is malformed.
VDEV_RT_API const Config& config();

// The configuration error, if any, without throwing.
VDEV_RT_API const std::optional<std::string>& config_error() noexcept;

// Whether the variables have been read yet (they are read at the first device use, not when the
// library loads): until then, setting VDEV_DEVICE_COUNT or VDEV_DEVICE_MEMORY still counts.
VDEV_RT_API bool config_read() noexcept;

// Parsers, exposed for tests. They throw std::invalid_argument naming `what` and the value.
VDEV_RT_API int parse_device_count(const std::string& text, const char* what);
VDEV_RT_API std::size_t parse_memory_size(const std::string& text, const char* what);
VDEV_RT_API int parse_thread_count(const std::string& text, const char* what);
// "streams,init" -> SanitizerFlag bits; an unknown name throws naming it and the valid ones.
VDEV_RT_API unsigned parse_sanitizer_flags(const std::string& text, const char* what);
// VDEV_OOM_AFTER: an integer in 0..2^63-1 (more is "out of range", not malformed).
VDEV_RT_API std::int64_t parse_oom_after(const std::string& text, const char* what);
// VDEV_DIST_FAULT: RANK:N:MODE, RANK an integer in 0..2^31-1, N in 1..2^63-1, MODE abort or hang.
VDEV_RT_API DistFault parse_dist_fault(const std::string& text, const char* what);

// device_threads when VDEV_DEVICE_THREADS is unset: the CPUs in this process's affinity mask
// minus one, at least 1 (a small kernel's thread count under the policy).
VDEV_RT_API int default_device_threads() noexcept;

}  // namespace vdev::rt
