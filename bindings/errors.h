// Error translation shared by the extension modules (torch_vdev._C and torch_vdev._testing).
//
// nanobind itself maps std::invalid_argument -> ValueError, std::out_of_range -> IndexError,
// nb::type_error -> TypeError and other std::exception -> RuntimeError. register_c10_errors()
// adds c10's errors, raised by backend calls: each becomes the Python exception torch itself
// would raise, with the message only (c10::Error::what() carries a C++ backtrace).
//
// Thread rules: call once per module, at import (with the GIL).
#pragma once

namespace vdev::bindings {

void register_c10_errors();

}  // namespace vdev::bindings
