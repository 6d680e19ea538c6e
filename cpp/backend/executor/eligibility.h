// Which operator calls the executor may queue: decided from the schema and the arguments, before
// any side effect.
//
// Declined (the caller runs the operator synchronously instead): results that are not tensors,
// tensor lists or None (bool, Scalar, int need values on the host); view results (a CPU copy
// cannot alias device storage); Device arguments; mutated CPU tensors (a CPU argument is
// snapshotted, so it must be read-only); tensors on a device other than vdev and CPU; the
// operators whose meta kernel disagrees with their CPU kernel on output shapes (found by the OpInfo
// sweep, tests/ops/test_opinfo.py); and those whose CUDA kernel synchronizes to check its results
// (backend/checks/host_checked_results.h).
//
// Thread rules: stateless.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <cstddef>

namespace vdev::backend {

// Whether `schema` applied to stack[first, first + arguments) may be queued.
bool eligible(const c10::FunctionSchema& schema, const torch::jit::Stack& stack, std::size_t first);

}  // namespace vdev::backend
