// Queueing the commonest quantized computations on the stream, as CUDA queues them:
// quantize_per_tensor, quantize_per_channel, dequantize, int_repr and clone. Their results have
// the input's sizes and memory format, known on the host, which allocates them; CPU's own
// argument checks run first on the host on a one-element stand-in (so a wrong scale, zero point
// or dtype raises CPU's error at the call); the task runs CPU's kernel on the worker on views made
// there (a quantized view: the integer bytes and the quantizer, per-channel parameters included)
// and copies its result into the device result.
//
// Thread rules: try_queue_quantized runs on the dispatching thread; its task on the current
// stream's worker.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

namespace vdev::backend {

// Queues `op` on `device`'s current stream and leaves its result on the stack when it is one of
// the operators above with arguments it handles; returns false (the stack untouched) otherwise.
bool try_queue_quantized(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                         c10::Device device);

}  // namespace vdev::backend
