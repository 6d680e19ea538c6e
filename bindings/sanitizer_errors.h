// Where the sanitizer meets libtorch_python. Its Python exception types
// (torch.vdev.sanitizer.StreamRaceError and UninitializedReadError, defined in Python) raised from
// inside any torch call: a C++ exception deriving from torch::PyTorchError, which torch's own
// Python bindings (HANDLE_TH_ERRORS) turn into the Python type it names. Kept apart from nanobind's
// headers (torch's pull in pybind11).
//
// Thread rules: set_sanitizer_error_types once at import, with the GIL held; raising is safe from
// any thread.
#pragma once

#include <Python.h>

#include <exception>

namespace vdev::bindings {

// Installs the backend's finding raiser (backend/sanitizer/findings.h) for these two types (new
// references are kept for the life of the process).
void set_sanitizer_error_types(PyObject* race, PyObject* uninitialized);

// For nanobind's exception translation: sets the Python error for a sanitizer finding in flight
// and returns true, or returns false for any other exception.
bool set_python_error_for_finding(const std::exception_ptr& p);

}  // namespace vdev::bindings
