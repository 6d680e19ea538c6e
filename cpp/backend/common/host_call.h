// The end of a call run on the host on CPU stand-ins of its device arguments, shared by the two
// host runs (executor/host_run.h for strided tensors, layouts/layout_host_run.h for sparse and
// quantized ones): CPU's kernel on the CPU stack, below autocast (CPU autocast on the host must
// not recast), with what it did to written arguments carried back whether or not it raised; then
// the device call's results in place of its arguments.
//
// Thread rules: stateless; runs on the thread that runs the call.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "backend/common/schema_arguments.h"
#include "backend/common/tensor_args.h"

namespace vdev::backend {

// Runs `op` on `cpu_stack` (the CPU forms of the arguments on top of `stack`), calls
// `carry_back()` after it (also when it raises), then replaces the arguments on `stack` with the
// results: a return that writes an argument is that device argument itself, the others are
// `to_device(cpu_result)` for each tensor in them.
template <typename CarryBack, typename ToDevice>
void call_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                  torch::jit::Stack& cpu_stack, CarryBack&& carry_back, ToDevice&& to_device) {
  const c10::FunctionSchema& schema = op.schema();
  const std::size_t nargs = schema.arguments().size();
  const std::size_t first = stack->size() - nargs;
  try {
    const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    op.callBoxed(&cpu_stack);
  } catch (...) {
    carry_back();
    throw;
  }
  carry_back();
  std::vector<c10::IValue> results;
  results.reserve(schema.returns().size());
  for (std::size_t r = 0; r < schema.returns().size(); ++r) {
    if (auto arg = written_argument(schema, schema.returns()[r])) {
      results.push_back((*stack)[first + *arg]);  // the written device argument itself
      continue;
    }
    results.push_back(map_tensors(cpu_stack[r], to_device));
  }
  torch::jit::drop(*stack, nargs);
  for (auto& v : results) stack->push_back(std::move(v));
}

}  // namespace vdev::backend
