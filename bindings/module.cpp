// torch_vdev._C: the extension module. Importing it initialises the backend (hooks) once.
#include <c10/util/Exception.h>
#include <nanobind/nanobind.h>

#include "backend/init.h"
#include "bindings/bindings.h"

namespace nb = nanobind;

namespace {

// c10 errors raised by backend calls become the Python exceptions torch itself would raise, with
// the message only (c10::Error::what() carries a C++ backtrace).
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
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
  }
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "torch_vdev native module: runtime device functions and backend initialisation";
  vdev::backend::init_backend();
  nb::register_exception_translator(&translate_c10_error);
  vdev::bindings::bind_device(m);
  vdev::bindings::bind_testing(m);
}
