// Running an operator on sparse or quantized vdev tensors with CPU's kernel on the calling thread:
// CPU views of every vdev argument (layouts/layout_views.h), CPU's kernel, results made vdev
// tensors. What vdev does for the kernels CUDA has for these layouts (CUDA's own code, which vdev
// cannot run) when they cannot be queued: kernels whose output size depends on values (coalesce,
// sparse + sparse) synchronize on CUDA too.
//
// Thread rules: runs on the dispatching thread; it waits for the device's current stream first
// (the caller reports the wait, common/sync_debug.h).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

namespace vdev::backend {

// Runs `op` on CPU views of the arguments on top of `stack`; leaves its results on the stack as
// vdev tensors on `device` (written arguments themselves, with what the kernel did to them).
void run_layout_op_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                           c10::Device device);

}  // namespace vdev::backend
