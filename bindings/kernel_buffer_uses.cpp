#include "bindings/kernel_buffer_uses.h"

#include <torch/csrc/autograd/python_variable.h>

#include "backend/common/vdev_device.h"

namespace vdev::bindings {

std::vector<backend::TensorUse> kernel_buffer_uses(const backend::KernelSignature& signature,
                                                   PyObject* args) {
  const std::string& kinds = signature.kinds();
  std::vector<backend::TensorUse> uses;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] != 'p' && kinds[i] != 'P') continue;
    PyObject* arg = PyTuple_GET_ITEM(args, static_cast<Py_ssize_t>(i));
    if (!THPVariable_Check(arg)) continue;          // LaunchArguments reported it
    const at::Tensor& t = THPVariable_Unpack(arg);  // the object's own: no reference taken
    if (t.device().type() != backend::kVdev) continue;
    uses.emplace_back(t, kinds[i] == 'p' ? backend::Access::kRead : backend::Access::kWrite);
  }
  return uses;
}

}  // namespace vdev::bindings
