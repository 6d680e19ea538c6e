// Whether a vdev tensor and a CPU tensor may take each other's place in a TensorImpl
// (aten::_has_compatible_shallow_copy_type), as CPU and CUDA tensors may.
//
// nn.Module._apply asks this before `param.data = moved` (keeping the Parameter object, so tied
// weights stay tied and optimizers built before model.to("vdev") train the moved parameters), and
// Variable::set_data (`p.data = t`) requires it. c10's TensorImpl::has_compatible_shallow_copy_type
// lists CPU, CUDA, MPS, HIP, XPU, HPU and MTIA as interchangeable dense backends but not
// PrivateUse1; its comment (c10/core/TensorImpl.h) directs PrivateUse1 backends to register this
// operator, whose own default is CompositeImplicitAutograd (a PrivateUse1 kernel takes precedence
// for the autograd key too).
//
// vdev tensors are plain strided TensorImpls (no subclass state), so a shallow copy between a
// vdev and a CPU TensorImpl loses nothing: it copies storage, sizes, strides, dtype and key set.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "backend/common/vdev_device.h"

namespace vdev::backend {
namespace {

// Dense and strided on the CPU or on vdev: the pairs CUDA's rule accepts with CUDA for vdev.
bool dense_cpu_or_vdev(const at::Tensor& t) {
  const c10::DeviceType type = t.device().type();
  return t.layout() == c10::kStrided && !t.is_mkldnn() && !t.is_quantized() &&
         (type == c10::DeviceType::CPU || type == kVdev);
}

bool vdev_has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (dense_cpu_or_vdev(self) && dense_cpu_or_vdev(from));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", &vdev_has_compatible_shallow_copy_type);
}

}  // namespace vdev::backend
