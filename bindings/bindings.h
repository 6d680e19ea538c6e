// Glue between Python and the runtime/backend: argument conversion and exception mapping only.
// nanobind maps std::invalid_argument -> ValueError, std::out_of_range -> IndexError,
// nb::type_error -> TypeError, other std::exception -> RuntimeError; c10 errors from backend calls
// map to the Python exception torch would raise (module.cpp).
// Every binding that can block releases the GIL.
#pragma once

#include <nanobind/nanobind.h>

namespace vdev::bindings {

void bind_device(nanobind::module_& m);
void bind_testing(nanobind::module_& m);

}  // namespace vdev::bindings
