#include "bindings/errors.h"

#include <c10/util/Exception.h>
#include <nanobind/nanobind.h>

#include <exception>

#include "runtime/errors.h"

namespace nb = nanobind;

namespace vdev::bindings {
namespace {

// torch.distributed.DistBackendError (torch._C._DistBackendError, a RuntimeError), as torch's
// own bindings raise c10::DistBackendError; RuntimeError where torch has no distributed support.
void set_dist_backend_error(const char* what) {
  const nb::object c = nb::module_::import_("torch._C");
  if (nb::hasattr(c, "_DistBackendError")) {
    PyErr_SetString(c.attr("_DistBackendError").ptr(), what);
  } else {
    PyErr_SetString(PyExc_RuntimeError, what);
  }
}

// torch.AcceleratorError with its error_code, as torch's own bindings raise it
// (_new_accelerator_error_object in torch/csrc/Exceptions.cpp).
void set_accelerator_error(const char* what, int code) {
  const nb::object type = nb::module_::import_("torch").attr("AcceleratorError");
  nb::object error = type(what);
  error.attr("error_code") = code;
  PyErr_SetObject(type.ptr(), error.ptr());
}

void translate_c10_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const c10::IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
  } catch (const c10::ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
  } catch (const c10::TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what_without_backtrace());
  } catch (const c10::NotImplementedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, e.what_without_backtrace());
  } catch (const c10::OutOfMemoryError& e) {
    const nb::object oom = nb::module_::import_("torch").attr("OutOfMemoryError");
    PyErr_SetString(oom.ptr(), e.what_without_backtrace());
  } catch (const c10::DistBackendError& e) {
    set_dist_backend_error(e.what_without_backtrace());
  } catch (const c10::AcceleratorError& e) {
    set_accelerator_error(e.what_without_backtrace(), e.get_error_code());
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
  } catch (const rt::NotImplemented& e) {  // a queued kernel's NotImplementedError
    PyErr_SetString(PyExc_NotImplementedError, e.what());
  } catch (const rt::TypeMismatch& e) {  // a queued kernel's TypeError
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (const rt::CommFailure& e) {  // a failed collective, seen through a stream
    set_dist_backend_error(e.what());
  } catch (const rt::DeviceAssertFailure& e) {  // a device-side assert (sticky)
    set_accelerator_error(e.what(), rt::kDeviceAssertErrorCode);
  }
}

}  // namespace

void register_c10_errors() { nb::register_exception_translator(&translate_c10_error); }

}  // namespace vdev::bindings
