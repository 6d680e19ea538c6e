#include "bindings/sanitizer_errors.h"

#include <torch/csrc/Exceptions.h>

#include <string>
#include <utility>

#include <vector>

#include "backend/sanitizer/findings.h"

namespace vdev::bindings {
namespace {

PyObject* g_race_type = nullptr;
PyObject* g_uninitialized_type = nullptr;

struct FindingError : torch::PyTorchError {
  FindingError(PyObject* type, std::string message)
      : torch::PyTorchError(std::move(message)), type_(type) {}
  PyObject* python_type() override { return type_; }

 private:
  PyObject* type_;
};

[[noreturn]] void raise_finding(backend::FindingKind kind, const std::string& message) {
  throw FindingError(kind == backend::FindingKind::kDataRace ? g_race_type : g_uninitialized_type,
                     message);
}

}  // namespace

void set_sanitizer_error_types(PyObject* race, PyObject* uninitialized) {
  Py_INCREF(race);
  Py_INCREF(uninitialized);
  g_race_type = race;
  g_uninitialized_type = uninitialized;
  backend::set_finding_raiser(&raise_finding);
}

bool set_python_error_for_finding(const std::exception_ptr& p) {
  try {
    std::rethrow_exception(p);
  } catch (FindingError& e) {
    PyErr_SetString(e.python_type(), e.what());
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace vdev::bindings
