// A convolution's first round of the argument check at the call (checks/stand_in_check.h).
//
// The small stand-ins of other operators keep the order of the call's sizes, not their divisions:
// a grouped convolution's channels (64 in 32 groups, weight [64, 2, 3, 3]) become 4 channels in 32
// groups, which CPU refuses, and the check would fall back to stand-ins of the real sizes (a whole
// convolution computed on the host). A convolution's stand-ins are made for it instead: one channel
// per group, the smallest spatial size that still has an output (transposed: 1), kernels of their
// own size; CPU's convolution accepts them whenever the real arguments have the sizes the meta
// convolution accepted, so only the checks that do not depend on sizes (dtypes) are left to fail.
//
// Thread rules: stateless; runs on the dispatching thread while a launch plan is made.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstddef>

namespace vdev::backend {

// Whether `op` is aten::convolution (what vdev's convolution_overrideable runs, ops/conv.cpp).
bool is_convolution(const c10::OperatorHandle& op);

// Whether CPU's convolution accepts the convolution's stand-ins for aten::convolution's arguments
// at stack[first, first + 9).
bool cpu_accepts_conv_stand_ins(const torch::jit::Stack& stack, std::size_t first);

}  // namespace vdev::backend
