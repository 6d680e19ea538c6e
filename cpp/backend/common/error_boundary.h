// The error boundary between the runtime and PyTorch (the checks made at a call are checks/).
//
// VDEV_RT(expr) evaluates a runtime call and converts the runtime's standard exceptions into the
// c10 error that torch turns into the matching Python exception:
//   std::out_of_range -> c10::IndexError (IndexError), std::invalid_argument -> c10::ValueError
//   (ValueError), vdev::rt::OutOfMemory -> c10::OutOfMemoryError (torch.OutOfMemoryError), any
//   vdev::rt::NotImplemented -> c10::NotImplementedError, vdev::rt::TypeMismatch -> c10::TypeError,
//   vdev::rt::CommFailure -> c10::DistBackendError, other std::exception -> c10::Error
//   (RuntimeError). The runtime message is kept unchanged.
//
// Thread rules: stateless.
#pragma once

#include <utility>

#include "backend/common/export.h"

namespace vdev::backend {

// Converts the exception in flight (must be called from a catch block) to a c10 error. Exported:
// VDEV_RT expands inline in whatever library uses it.
[[noreturn]] VDEV_BACKEND_API void rethrow_as_torch_error();

// The other direction, for a task failing on a stream worker: the c10 error in flight becomes the
// runtime exception of the same kind (c10::IndexError -> std::out_of_range, ValueError ->
// std::invalid_argument, NotImplementedError -> rt::NotImplemented, TypeError ->
// rt::TypeMismatch, OutOfMemoryError -> rt::OutOfMemory, DistBackendError -> rt::CommFailure,
// others -> std::runtime_error), with the
// message and without the C++ backtrace, so the host raises the Python type the kernel raised.
[[noreturn]] VDEV_BACKEND_API void rethrow_as_runtime_error();

template <typename F>
decltype(auto) call_runtime(F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (...) {
    rethrow_as_torch_error();
  }
}

}  // namespace vdev::backend

#define VDEV_RT(expr) ::vdev::backend::call_runtime([&]() -> decltype(auto) { return expr; })
