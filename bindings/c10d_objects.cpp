#include "bindings/c10d_objects.h"

// torch's pybind11 setup: the intrusive_ptr holder type and torch's type casters. The module
// shares pybind11's internals with torch._C (same pybind11 and ABI), so torch's registered classes
// (c10d::Backend) cast both ways here.
#include <torch/csrc/utils/pybind.h>

#include <stdexcept>

#include "backend/distributed/comm_backend.h"

namespace vdev::bindings {

PyObject* new_comm_backend(PyObject* gloo, int rank, int size) {
  pybind11::handle handle(gloo);
  c10::intrusive_ptr<c10d::Backend> inner;
  try {
    inner = handle.cast<c10::intrusive_ptr<c10d::Backend>>();
  } catch (const pybind11::cast_error&) {
    throw std::invalid_argument("vccl: expected a torch.distributed Backend (ProcessGroupGloo)");
  }
  c10::intrusive_ptr<c10d::Backend> backend =
      c10::make_intrusive<vdev::backend::CommBackend>(std::move(inner), rank, size);
  // Cast as the registered base class: Python sees a torch.distributed Backend.
  return pybind11::cast(backend).release().ptr();
}

}  // namespace vdev::bindings
