// Operators whose tensor arguments are all empty are first run as CPU's own operator, on the host,
// on empty CPU tensors with the same sizes, strides and dtypes.
//
// Why: the executor computes an operator through its meta kernel and its out= form, and some
// functional operators check more than either (CPU's max() and min() reject an empty input, mode()
// an empty dimension). With no element there is no data to wait for or copy, so running CPU's
// operator itself costs only metadata and raises exactly CPU's error (type and message) at the
// call, as CPU and CUDA raise it, instead of returning a value or failing later on the stream.
//
// Thread rules: stateless; runs on the dispatching thread.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace vdev::backend {

// Raises CPU's error when the operator's tensor arguments are all empty and CPU's operator rejects
// them; does nothing otherwise (operators with Generator or Device arguments are left alone).
void check_like_cpu_when_inputs_are_empty(const c10::OperatorHandle& op,
                                          const torch::jit::Stack& stack);

}  // namespace vdev::backend
