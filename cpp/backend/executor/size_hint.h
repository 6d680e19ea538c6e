// The thread policy's hint of an operator kernel's size (TaskTag::elements,
// common/thread_policy.h), computed once per launch plan: the most elements of one tensor the
// call reads or writes, or, for a matrix product or a convolution, its multiply-adds divided by
// kMultiplyAddsPerElement, whichever is more (a small matrix product or convolution is still a lot
// of work per element).
//
// Thread rules: stateless; runs on the dispatching thread while a plan is made.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/executor/return_metadata.h"

namespace vdev::backend {

std::uint64_t size_hint(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                        std::size_t first, const std::vector<MetaReturn>& returns);

}  // namespace vdev::backend
