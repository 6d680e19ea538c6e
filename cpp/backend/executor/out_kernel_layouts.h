// Whether a plan's out= kernel may write its fresh outputs in the layouts the plan gives them.
//
// A plan with an out= overload (launch_plan.h, out_op) runs CPU's out= kernel straight into the
// device outputs, laid out as the meta kernel (or vdev's layout rules) says. Most out= kernels
// honour their out tensor's strides; some trust that it has the layout their own functional
// kernel would give it and write that layout whatever its strides (_log_softmax_backward_data.out
// writes contiguously; a custom operator's kernel may do anything). Where the plan's layout and
// CPU's differ, such a kernel gives silently wrong values. So where they may differ (a vdev
// argument or an output that is not contiguous), CPU's functional kernel is run once per plan on
// stand-ins that keep the arguments' layouts (backend/common/stand_in_trials.h), and each output's
// order of dimensions is compared with the plan's: where one differs, or no trial can tell
// (custom and random operators, stand-ins too large), the plan runs the functional kernel and
// copies its results into the device outputs, whose layout stays the plan's.
//
// Operators computed by TensorIterator (launch_plan.cpp, computed_by_tensor_iterator) need no
// trial: TensorIterator writes any out tensor's strides.
//
// A trial of the real sizes computes the whole operator on the host once per plan (a transposed
// gradient of 4M elements: ~40 ms at the first call); a kernel's TORCH_WARN_ONCE reached first
// by a trial is spent there, as in the argument check.
//
// Thread rules: stateless but for two relaxed counters; runs on the dispatching thread while a
// plan is made.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <vector>

#include "backend/common/export.h"
#include "backend/executor/return_metadata.h"

namespace vdev::backend {

// Whether the out= kernel of `op`'s plan for stack[first, first + nargs) may write `returns`
// (the plan's fresh outputs, `output_elements` elements in all) in their layouts. `returns_vary`:
// the plan's returns are made again for every call (launch_plan.h, returns_from_cpu_values), so
// one call's trial cannot vouch for the next: where layouts may differ, the out= kernel is not
// kept.
bool out_kernel_keeps_layouts(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                              std::size_t first, std::size_t nargs,
                              const std::vector<MetaReturn>& returns, int64_t output_elements,
                              bool returns_vary);

// How many layout trials ran, and how many plans were denied their out= kernel, in the process
// (for tests).
VDEV_BACKEND_API std::uint64_t out_layout_trials() noexcept;
VDEV_BACKEND_API std::uint64_t out_kernels_declined_for_layout() noexcept;

}  // namespace vdev::backend
