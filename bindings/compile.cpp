// torch.compile support: the launcher of Inductor's generated C++ kernels
// (backend/compile/kernel_launch.h) and the raw stream handle Dynamo's device interface reports.
//
// A _CompiledKernel is what the generated wrapper code calls for each vdev kernel, with the
// kernel's buffers (vdev tensors) and sizes: it reads the arguments the way Inductor's own C++
// bindings do (torch's exported data-pointer accessor, no libtorch_python header), checks them
// and queues the kernel on the current stream of the tensors' device.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/compile/kernel_launch.h"
#include "bindings/bindings.h"
#include "runtime/device.h"
#include "runtime/errors.h"
#include "runtime/memory.h"

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

std::string device_name(int index) { return "vdev:" + std::to_string(index); }

class CompiledKernel {
 public:
  // `entry`: the address of the kernel's vdev_kernel_entry trampoline; `kinds`: one letter per
  // argument, 'p' buffer pointer, 'i' int64_t, 'f' float; `name`: the kernel's name.
  CompiledKernel(std::uintptr_t entry, std::string kinds, const std::string& name)
      : entry_(reinterpret_cast<backend::KernelEntry>(entry)),
        kinds_(std::move(kinds)),
        name_(backend::kernel_task_name(name)) {
    if (entry == 0) rt::fail<std::invalid_argument>("_CompiledKernel", "null entry for ", name);
    for (char k : kinds_) {
      if (k != 'p' && k != 'i' && k != 'f') {
        rt::fail<std::invalid_argument>("_CompiledKernel", "bad argument kind '", std::string(1, k),
                                        "' for ", name, " (p, i or f)");
      }
    }
    init_tensor_access();
    // Inductor's code caches keep compiled kernels until the process ends, and nanobind would
    // report each one as leaked at exit. This turns leak reports off for the whole module (the
    // vdev nanobind domain) once a kernel exists; it cannot be narrowed to one type.
    nb::set_leak_warnings(false);
  }

  void operator()(nb::args args) const {
    if (args.size() != kinds_.size()) {
      throw nb::type_error((std::string(name_) + "() takes " + std::to_string(kinds_.size()) +
                            " arguments (" + std::to_string(args.size()) + " given)")
                               .c_str());
    }
    backend::KernelArgs slots(kinds_.size());
    backend::HostScalars scalars;
    int device = -1;
    for (std::size_t i = 0; i < kinds_.size(); ++i) {
      PyObject* arg = args[i].ptr();
      switch (kinds_[i]) {
        case 'p':
          slots[i].pointer = buffer_address(arg, i, device, scalars);
          break;
        case 'i': {
          const long long v = PyLong_AsLongLong(arg);
          if (v == -1 && PyErr_Occurred()) throw nb::python_error();
          slots[i].integer = v;
          break;
        }
        default: {
          const double v = PyFloat_AsDouble(arg);
          if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
          slots[i].real = v;
          break;
        }
      }
    }
    if (device < 0) device = rt::get_device();  // no buffer with bytes: nothing to read or write
    nb::gil_scoped_release no_gil;              // VDEV_LAUNCH_BLOCKING waits for the kernel
    backend::launch_kernel(entry_, name_, static_cast<c10::DeviceIndex>(device), std::move(slots),
                           std::move(scalars));
  }

  const char* name() const { return name_; }
  const std::string& kinds() const { return kinds_; }

 private:
  // The kernel address of tensor argument `i`'s data; `device` is the kernels' device, set by the
  // first buffer with bytes and checked against the others. A one-element CPU tensor is copied
  // into `scalars` (its slot is filled on the worker).
  void* buffer_address(PyObject* arg, std::size_t i, int& device,
                       backend::HostScalars& scalars) const {
    if (!PyObject_TypeCheck(arg, g_tensor_access.tensor_type)) {
      throw nb::type_error((std::string(name_) + ": argument " + std::to_string(i) +
                            " must be a Tensor, not " + Py_TYPE(arg)->tp_name)
                               .c_str());
    }
    void* data = g_tensor_access.data_ptr(arg);
    if (data == nullptr) return nullptr;  // no bytes (an empty tensor): never dereferenced
    const int own = rt::pointer_device(data);
    if (own < 0) {
      copy_host_scalar(arg, data, i, scalars);
      return nullptr;
    }
    if (device >= 0 && own != device) {
      throw std::runtime_error(
          "Expected all tensors to be on the same device, but found at least two devices, " +
          device_name(device) + " and " + device_name(own) + "! (compiled kernel " + name_ + ")");
    }
    device = own;
    return rt::kernel_address(data);
  }

  void copy_host_scalar(PyObject* arg, const void* data, std::size_t i,
                        backend::HostScalars& scalars) const {
    nb::handle tensor(arg);
    const auto numel = nb::cast<std::int64_t>(tensor.attr("numel")());
    const auto size = nb::cast<std::size_t>(tensor.attr("element_size")());
    if (numel != 1 || size > sizeof(backend::HostScalar::bytes)) {
      rt::fail<std::invalid_argument>(
          name_, "argument ", i, " is a CPU tensor of ", numel,
          " elements; a compiled vdev kernel reads vdev tensors and one-element CPU tensors only");
    }
    backend::HostScalar& s = scalars.emplace_back();
    s.slot = static_cast<std::uint32_t>(i);
    std::memcpy(s.bytes, data, size);
  }

  backend::KernelEntry entry_;
  std::string kinds_;
  const char* name_;
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
  m.def("_kernel_threads", &backend::task_intra_op_threads,
        "The intra-op threads a task queued now by the calling thread runs with (its "
        "torch.get_num_threads(), at most VDEV_DEVICE_THREADS): what Inductor generates vdev "
        "kernels for.");
}

}  // namespace vdev::bindings
