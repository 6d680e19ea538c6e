// Queueing CPU's kernels for sparse tensors whose results are dense tensors of sizes known on the
// host: sparse x dense products (addmm, mm, bmm, addmv, and their out= and in-place forms) and
// dense + sparse (add.out into a dense tensor, the path of to_dense and of a sparse gradient's
// optimizer step). CUDA queues these; running them on the host would synchronize where CUDA does
// not. The task builds CPU views of the sparse and dense members on the stream worker
// (layouts/layout_views.h) and runs CPU's kernel there; its errors come at the next synchronize,
// as a queued CUDA kernel's do.
//
// Thread rules: try_queue_layout_product runs on the dispatching thread; the task on the
// current stream's worker.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

namespace vdev::backend {

// Queues `op` on `device`'s current stream and leaves its results on the stack, when the call is
// one of the products above with dense results whose sizes are known; returns false (the stack
// untouched) otherwise.
bool try_queue_layout_product(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                              c10::Device device);

}  // namespace vdev::backend
