// Boolean (and uint8) index masks of advanced indexing become their nonzero() indices at the call,
// as CUDA's index kernels make them (ATen's expandTensors) before anything is launched.
//
// Why: `x[mask]` and `x[mask] = v` are index / index_put_ calls whose `Tensor?[] indices` may hold
// a mask. CUDA expands a mask into long indices on the host first (a vdev mask: nonzero()
// synchronizes, as on CUDA; a CPU mask: computed on the CPU), so the index result's shape is
// known and every check of it (the value's broadcast, "shape mismatch: value tensor of shape [3]
// cannot be broadcast to indexing result of shape [2]") is made at the call. Expanded here, the
// call's plan is keyed on the indices' metadata, which encodes the count the mask selects, so it
// is queued like any gather or scatter and checked at the call; a mask left in place would make
// the output shape (index) or the checks (index_put_) depend on values a plan cannot know.
// Masks that ATen's index_put_ turns into masked_fill_ (one mask on self's device, a one-element
// value, no accumulation: canDispatchToMaskedFill) are left in place, since no index is ever made
// for them (`x[mask] = 0.0` never synchronizes, on CUDA or vdev; a uint8 mask there fails
// masked_fill_'s dtype check, as on CPU and CUDA).
//
// Thread rules: stateless; runs on the dispatching thread.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace vdev::backend {

// Replaces, in place, the masks in the `indices` argument of an advanced-indexing operator on top
// of `stack` by their nonzero() indices (ATen's checks and uint8 deprecation warning included);
// does nothing for other operators.
void expand_index_masks(const c10::OperatorHandle& op, torch::jit::Stack& stack);

}  // namespace vdev::backend
