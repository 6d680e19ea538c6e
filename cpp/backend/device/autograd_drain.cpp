#include "backend/device/autograd_drain.h"

#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/autograd.h>

#include "runtime/device.h"

namespace vdev::backend {

void drain_autograd_device_threads() {
  for (int i = 0; i < rt::device_count(); ++i) {
    const auto options = at::TensorOptions().device(c10::DeviceType::PrivateUse1, i);
    const at::Tensor leaf = at::empty({0}, options).requires_grad_(true);
    torch::autograd::backward({leaf.view({0})}, {at::empty({0}, options)},
                              /*retain_graph=*/false, /*create_graph=*/false, {leaf});
  }
}

}  // namespace vdev::backend
