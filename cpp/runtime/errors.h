// Error style of the runtime layer.
//
// The runtime reports failures as C++ exceptions of standard types so that every boundary can map
// them without knowing this library:
//   std::invalid_argument -> ValueError     (a value of the right type that is not allowed)
//   std::out_of_range     -> IndexError     (an index outside the valid range)
//   vdev::rt::OutOfMemory -> torch.OutOfMemoryError
//   vdev::rt::CommFailure -> torch.distributed.DistBackendError (a collective failed)
//   vdev::rt::DeviceAssertFailure -> torch.AcceleratorError (a device-side assert: sticky,
//                            runtime/device_assert.h)
//   std::runtime_error    -> RuntimeError   (configuration and state errors)
// Messages name the runtime function and the offending value, and the valid range where there is
// one: "[set_device] device index 5 out of range: 2 vdev devices (0..1)". A message is valid UTF-8
// (fail() escapes any other byte as \xNN): the offending value may be bytes from the environment
// or a file, and Python cannot make a str of invalid UTF-8 (the user would get a bare
// UnicodeDecodeError instead of the message).
//
// Thread rules: stateless; callable from any thread.
#pragma once

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

#include "runtime/export.h"

namespace vdev::rt {

// Raised when a device allocation would exceed the device's capacity.
class VDEV_RT_API OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The kinds of error a task can report besides std::out_of_range (IndexError) and
// std::invalid_argument (ValueError), so that the layer above raises the Python type the kernel
// raised (backend/common/error_boundary.h maps them).
class VDEV_RT_API NotImplemented : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class VDEV_RT_API TypeMismatch : public std::runtime_error {  // Python's TypeError
 public:
  using std::runtime_error::runtime_error;
};
// A collective (or point-to-point operation) that failed or timed out on its communication
// stream: it keeps its kind through events and stream waits, so that every place the failure
// surfaces raises torch.distributed.DistBackendError, as NCCL's watchdog does.
class VDEV_RT_API CommFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A device-side assert (runtime/device_assert.h): the task that hit it, and every later operation
// on its device, raise torch.AcceleratorError with CUDA's error code for it.
class VDEV_RT_API DeviceAssertFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
inline constexpr int kDeviceAssertErrorCode = 710;  // cudaErrorAssert

// What kind of exception a failed task threw: kept with its message so it is rethrown as the
// same type on the host.
enum class ErrorKind {
  kRuntime,
  kIndex,
  kValue,
  kNotImplemented,
  kType,
  kOutOfMemory,
  kComm,
  kDeviceAssert,
};

// The kind of the exception in flight (call from a catch block).
VDEV_RT_API ErrorKind current_error_kind() noexcept;

// Throws `message` as an exception of `kind`.
[[noreturn]] VDEV_RT_API void throw_error(ErrorKind kind, const std::string& message);

// `text` with each byte that is not part of valid UTF-8 written as \xNN (valid UTF-8 unchanged).
VDEV_RT_API std::string printable_utf8(const std::string& text);

// Whether `text` is valid UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF);
// if not and `bad_at` is given, the offset of the first byte that is not.
VDEV_RT_API bool is_valid_utf8(const std::string& text, std::size_t* bad_at = nullptr) noexcept;

namespace detail {
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Throws E with the message "[fn] args...".
template <typename E, typename... Args>
[[noreturn]] void fail(const char* fn, const Args&... args) {
  throw E(printable_utf8(detail::cat("[", fn, "] ", args...)));
}

}  // namespace vdev::rt
