// Kernels of ops_tensor.cpp that other backend files call directly.
//
// Thread rules: like any ATen kernel, called on the dispatching thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace vdev::backend {

// aten::resize_ for vdev tensors: grows the storage through the vdev allocator on the tensor's own
// device (never the current one) and copies the old bytes with a device-to-device copy.
const at::Tensor& vdev_resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                               std::optional<at::MemoryFormat> memory_format);

}  // namespace vdev::backend
