// torch.compile support: the launcher of Inductor's generated C++ kernels
// (backend/compile/launch_arguments.h, kernel_launch.h) and the raw stream handle Dynamo's device
// interface reports.
//
// A _CompiledKernel is what the generated wrapper code calls for each vdev kernel, with the
// kernel's buffers (vdev tensors) and sizes. The binding only converts: it reads each argument the
// way Inductor's own C++ bindings do (torch's exported data-pointer accessor, no libtorch_python
// header; python/torch_vdev/compile/torch_internals.py lists it) and hands the values to
// backend::LaunchArguments, which checks them and queues the kernel on the current stream of the
// tensors' device.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/compile/launch_arguments.h"
#include "bindings/bindings.h"
#include "bindings/kernel_buffer_uses.h"

namespace nb = nanobind;

namespace vdev::bindings {
namespace {

// torch.Tensor's type and torch's accessor of a tensor object's data pointer (the one Inductor's
// generated CPU bindings use: torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr).
// Set with the GIL held by the first _CompiledKernel; never changed after.
struct TensorAccess {
  PyTypeObject* tensor_type = nullptr;
  void* (*data_ptr)(PyObject*) = nullptr;
};
TensorAccess g_tensor_access;

void init_tensor_access() {
  if (g_tensor_access.data_ptr != nullptr) return;
  nb::module_ torch = nb::module_::import_("torch");
  nb::object accessor = torch.attr("_C").attr("_dynamo").attr("guards").attr(
      "_torchinductor_pyobject_tensor_data_ptr");
  g_tensor_access.tensor_type = reinterpret_cast<PyTypeObject*>(torch.attr("Tensor").ptr());
  g_tensor_access.data_ptr =
      reinterpret_cast<void* (*)(PyObject*)>(nb::cast<std::uintptr_t>(accessor));
}

class CompiledKernel {
 public:
  // `entry`: the address of the kernel's vdev_kernel_entry trampoline; `kinds`: one letter per
  // argument, 'p' / 'P' buffer pointer read / written, 'i' int64_t, 'f' float; `name`: the kernel's
  // name.
  CompiledKernel(std::uintptr_t entry, std::string kinds, const std::string& name)
      : signature_(entry, std::move(kinds), name) {
    init_tensor_access();
    // Inductor's code caches keep compiled kernels until the process ends, and nanobind would
    // report each one as leaked at exit. This turns leak reports off for the whole module (the
    // vdev nanobind domain) once a kernel exists; it cannot be narrowed to one type.
    nb::set_leak_warnings(false);
  }

  void operator()(nb::args args) const {
    backend::LaunchArguments launch(signature_, args.size());
    const std::string& kinds = signature_.kinds();
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      PyObject* arg = args[i].ptr();
      switch (kinds[i]) {
        case 'p':
        case 'P':
          add_buffer(launch, arg, i);
          break;
        case 'i': {
          const long long v = PyLong_AsLongLong(arg);
          if (v == -1 && PyErr_Occurred()) throw nb::python_error();
          launch.add_integer(i, v);
          break;
        }
        default: {
          const double v = PyFloat_AsDouble(arg);
          if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
          launch.add_real(i, v);
          break;
        }
      }
    }
    // The launch observers see the kernel's buffers (backend/common/launch.h).
    std::vector<backend::TensorUse> uses;
    if (backend::launch_observers() != nullptr) uses = kernel_buffer_uses(signature_, args.ptr());
    nb::gil_scoped_release no_gil;  // VDEV_LAUNCH_BLOCKING waits for the kernel
    std::move(launch).launch(uses);
  }

  const char* name() const { return signature_.name(); }
  const std::string& kinds() const { return signature_.kinds(); }

 private:
  // Tensor argument `i`: its data pointer, and for a CPU tensor its element count and size.
  void add_buffer(backend::LaunchArguments& launch, PyObject* arg, std::size_t i) const {
    if (!PyObject_TypeCheck(arg, g_tensor_access.tensor_type)) {
      throw nb::type_error((std::string(signature_.name()) + ": argument " + std::to_string(i) +
                            " must be a Tensor, not " + Py_TYPE(arg)->tp_name)
                               .c_str());
    }
    void* data = g_tensor_access.data_ptr(arg);
    if (launch.add_buffer(i, data) != backend::LaunchArguments::Buffer::kHost) return;
    nb::handle tensor(arg);
    launch.add_host_scalar(i, data, nb::cast<std::int64_t>(tensor.attr("numel")()),
                           nb::cast<std::size_t>(tensor.attr("element_size")()));
  }

  backend::KernelSignature signature_;
};

}  // namespace

void bind_compile(nb::module_& m) {
  nb::class_<CompiledKernel>(m, "_CompiledKernel",
                             "An Inductor-generated C++ kernel, queued on the current stream of "
                             "its tensors' device when called (backend/compile/kernel_launch.h).")
      .def(nb::init<std::uintptr_t, std::string, const std::string&>(), nb::arg("entry"),
           nb::arg("kinds"), nb::arg("name"))
      .def("__call__", &CompiledKernel::operator())
      .def_prop_ro("name", &CompiledKernel::name)
      .def_prop_ro("kinds", &CompiledKernel::kinds);
  m.def(
      "_current_raw_stream",
      [](int device) {
        return reinterpret_cast<std::uintptr_t>(
            &backend::current_runtime_stream(static_cast<c10::DeviceIndex>(device)));
      },
      nb::arg("device"),
      "The calling thread's current stream of a device as an integer handle (the runtime "
      "stream's address, as a cudaStream_t is one): Dynamo's get_raw_stream.");
  m.def(
      "_kernel_threads", [] { return backend::task_intra_op_threads().host_running; },
      "The intra-op threads a small kernel queued now by the calling thread runs with (its "
      "torch.get_num_threads(), at most the cores minus one, or VDEV_DEVICE_THREADS when set): "
      "what Inductor generates vdev kernels for.");
}

}  // namespace vdev::bindings
