// `Tensor?[]` arguments as c10's canonical list type.
//
// IValue::isOptionalTensorList() compares the list's element type with c10's one `Tensor?` type
// object by address. TorchScript builds its lists (prim::ListConstruct, `x[m]` in a scripted
// function) with an `Optional[Tensor]` type of its own, so such a list is "not an optional tensor
// list" to every helper that walks tensor arguments: ATen's cpu_fallback then leaves a vdev index
// inside it (and CPU's index kernel rejects it), the device rules and the executor do not see it.
// Eager calls never have this: the Python binding builds the canonical type.
//
// Thread rules: stateless; runs on the dispatching thread, for every call of the boxed kernel
// (walks the schema's arguments and rebuilds only lists that need it).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace vdev::backend {

// Rebuilds, in place, every `Tensor?[]` argument of `op` on top of `stack` whose list is not of
// c10's canonical element type.
void canonicalize_optional_tensor_lists(const c10::OperatorHandle& op, torch::jit::Stack& stack);

}  // namespace vdev::backend
