// The asynchronous operator executor: runs any aten operator on vdev tensors as a task on the
// current stream of their device.
//
// On the calling thread: the operator runs on meta tensors (PyTorch's meta kernels) to learn its
// output sizes, strides and dtypes; fresh outputs are allocated on the device; every vdev argument
// is replaced by a CPU alias of its device bytes (backend/cpu_view.h) and every CPU tensor argument
// by a snapshot. The task then runs the CPU kernel on those aliases on the stream's worker: the
// out= overload writing straight into the outputs when there is one (backend/out_variants.h),
// otherwise the functional kernel followed by a copy into the outputs. In-place and out= operators
// write through their aliases. The task holds no device memory: the caching allocator orders the
// reuse of freed blocks by streams (backend/device_cache.h), as CUDA's does.
//
// try_enqueue_operator() returns false, having changed nothing, when the operator cannot run this
// way: its output shape depends on data (the meta kernel fails), it has no meta kernel, it returns
// non-tensor values (bool, Scalar, int), it draws random numbers (a Generator argument: the CPU
// generator must be used in host order), it takes a Device argument, it mutates a CPU tensor, or
// it returns a view. The caller then runs it synchronously (backend/fallback.cpp).
//
// The task runs below autograd and with its own dispatch state: the worker never depends on the
// calling thread's thread-local state (grad mode, inference mode, autocast).
//
// Thread rules: called on the dispatching thread; the task runs on a stream worker.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

namespace vdev::backend {

bool try_enqueue_operator(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                          c10::Device device);

}  // namespace vdev::backend
