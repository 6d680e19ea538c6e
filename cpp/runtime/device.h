// Device registry of the simulated driver: how many devices there are, what they are, and which one
// is current on the calling thread.
//
// The current device is thread-local and starts at 0 on every thread, as with CUDA. Setting it
// never touches another thread's state. Functions that take a device index validate it and throw
// (see runtime/errors.h): std::out_of_range for an index outside 0..count-1, std::invalid_argument
// for a negative index where none is allowed. The noexcept functions exist because c10 demands
// them (deviceCount, uncheckedSetDevice).
//
// Thread rules: every function is safe from any thread; properties are immutable once created.
#pragma once

#include <cstddef>
#include <string>

#include "runtime/export.h"

namespace vdev::rt {

struct DeviceProperties {
  int index;
  std::string name;          // "vdev virtual device N", or the profile's (VDEV_PROFILE)
  std::size_t total_memory;  // capacity in bytes (VDEV_DEVICE_MEMORY, else the profile's)
  int major;                 // simulated compute capability (the profile's; default (1, 0))
  int minor;
  int multi_processor_count;  // the profile's (informational; default 2)
};

// Number of devices; throws std::runtime_error if VDEV_DEVICE_COUNT is malformed.
VDEV_RT_API int device_count();
// Number of devices, or 0 if the configuration is malformed. Never throws.
VDEV_RT_API int device_count_noexcept() noexcept;

// Throws unless 0 <= index < device_count(). `fn` names the caller in the message.
VDEV_RT_API void check_device_index(int index, const char* fn);

VDEV_RT_API int get_device() noexcept;
VDEV_RT_API void set_device(int index);
// Sets the current device and returns the previous one.
VDEV_RT_API int exchange_device(int index);
// As exchange_device, but -1 means "no change" and returns the current device unchanged.
VDEV_RT_API int maybe_exchange_device(int index);
// Sets the current device without validation; for destructors (c10 uncheckedSetDevice). An
// invalid index is ignored rather than stored, so the thread state always stays valid.
VDEV_RT_API void unchecked_set_device(int index) noexcept;

VDEV_RT_API const DeviceProperties& device_properties(int index);

}  // namespace vdev::rt
