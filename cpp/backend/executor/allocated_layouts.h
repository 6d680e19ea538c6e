// The layouts CUDA's kernels allocate fresh outputs in where the operator's meta kernel says
// otherwise, for the launch plan (executor/launch_plan.h), which gives its fresh outputs these
// strides instead of the meta kernel's.
//
// Where the plan runs an out= kernel this is more than the layout: _log_softmax_backward_data.out
// writes its result contiguously whatever the out tensor's strides, so an output laid out as the
// meta kernel says got wrong values (a transposed gradient of log_softmax).
//
// Thread rules: stateless; runs on the dispatching thread while a plan is made.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>
#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace vdev::backend {

// The strides CUDA's kernel of `schema` gives its fresh output of `sizes` (the call's arguments
// at stack[first, ...)); nullopt where vdev keeps the meta kernel's.
std::optional<std::vector<int64_t>> allocated_output_strides(const c10::FunctionSchema& schema,
                                                             const torch::jit::Stack& stack,
                                                             std::size_t first,
                                                             c10::IntArrayRef sizes);

}  // namespace vdev::backend
