// The tensors an aten operator call reads and writes, from its schema's alias annotations, for the
// sanitizer (stream_sanitizer.h): arguments annotated as written (Tensor(a!)) are written, keyword
// out= arguments and the first argument of in-place operators that only overwrite (fill_, zero_,
// the random fills, index_put_, ...) without reading, other in-place arguments read and written;
// every other tensor argument is read, and fresh outputs are written.
//
// Thread rules: stateless; runs on the dispatching thread.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstddef>
#include <vector>

#include "backend/sanitizer/stream_sanitizer.h"

namespace vdev::backend {

// How the call on stack[first, first + nargs) accesses its argument `i` (a schema position), by
// the rules above: for the host runs of sparse and quantized tensors, which report the accesses
// of their arguments' member tensors (layouts/layout_host_run.h).
Access argument_access(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                       std::size_t first, std::size_t i);

// The uses of the call's arguments stack[first, first + nargs) and of `fresh` outputs (tensors
// or tensor lists; the caller keeps them alive while the uses are used).
std::vector<TensorUse> operator_uses(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                     std::size_t first,
                                     const std::vector<const c10::IValue*>& fresh);

}  // namespace vdev::backend
