// Operators whose meta kernel disagrees with CPU's kernel about some returns' sizes or dtypes, and
// how their launch plans get CPU's metadata instead of declining to queue them.
//
// Batch norm is the case that matters (every evaluation-mode CNN step): in evaluation mode CPU
// returns empty save_mean/save_invstd where the meta kernel says [C], and for half and bfloat16
// inputs CPU keeps the saved statistics in the input dtype where the meta kernel uses float. The
// saved statistics depend only on the dtypes, the channel count and the mode, so CPU's own kernel
// is run once per launch plan (plans are cached) on a probe of two elements per channel, and its
// returns' metadata replaces the meta kernel's; the output itself has the input's sizes in the
// memory format CPU gives it (empty_like with the input's suggested memory format).
//
// Embedding bag too: CPU sizes its offset2bag and max_indices returns by mode differently from the
// meta kernel; the sizes depend only on the arguments' sizes, the mode and the flags, so the probe
// has the indices' and offsets' sizes, all zero, and a weight of the rows padding_idx needs.
//
// Thread rules: stateless; runs on the dispatching thread when a plan is made.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <vector>

#include "backend/executor/return_metadata.h"

namespace vdev::backend {

// Whether this operator's plan needs CPU's metadata (batch norm and embedding bag forms).
bool returns_shaped_by_cpu(const c10::FunctionSchema& schema);

// Replaces `returns` (the meta kernel's) with CPU's metadata for the call on
// stack[first, first + nargs); false when the probe cannot be made (then the call runs
// synchronously).
bool shape_returns_as_cpu(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                          std::size_t first, std::size_t nargs, std::vector<MetaReturn>& returns);

}  // namespace vdev::backend
