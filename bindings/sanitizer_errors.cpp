#include "bindings/sanitizer_errors.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <string>
#include <utility>

#include <vector>

#include "backend/common/stream_lookup.h"
#include "backend/common/vdev_device.h"
#include "backend/sanitizer/findings.h"
#include "backend/sanitizer/stream_sanitizer.h"

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

void sanitize_kernel_buffers(const backend::KernelSignature& signature, PyObject* args) {
  const std::string& kinds = signature.kinds();
  std::vector<backend::TensorUse> uses;
  int device = -1;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] != 'p' && kinds[i] != 'P') continue;
    PyObject* arg = PyTuple_GET_ITEM(args, static_cast<Py_ssize_t>(i));
    if (!THPVariable_Check(arg)) continue;  // LaunchArguments reported it
    const at::Tensor& t = THPVariable_Unpack(arg);
    if (t.device().type() != backend::kVdev) continue;
    if (device < 0) device = t.device().index();
    uses.push_back({t, kinds[i] == 'p' ? backend::Access::kRead : backend::Access::kWrite});
  }
  if (device < 0) return;
  backend::sanitize_queued(backend::current_runtime_stream(static_cast<c10::DeviceIndex>(device)),
                           signature.name(), uses);
}

}  // namespace vdev::bindings
