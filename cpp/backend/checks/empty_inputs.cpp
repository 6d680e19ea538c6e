#include "backend/checks/empty_inputs.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>

#include "backend/common/tensor_args.h"

namespace vdev::backend {
namespace {

// True when the arguments hold at least one tensor, all of them empty, and nothing that a CPU
// call could not take (generators and devices belong to vdev).
bool all_tensors_empty(const torch::jit::Stack& stack, std::size_t first) {
  bool any = false;
  for (std::size_t i = first; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isGenerator() || v.isDevice()) return false;
    const bool non_empty = any_tensor(v, [&](const at::Tensor& t) {
      any = any || t.defined();
      return t.defined() && t.numel() != 0;
    });
    if (non_empty) return false;
  }
  return any;
}

}  // namespace

void check_like_cpu_when_inputs_are_empty(const c10::OperatorHandle& op,
                                          const torch::jit::Stack& stack) {
  const std::size_t n = op.schema().arguments().size();
  const std::size_t first = stack.size() - n;
  if (!all_tensors_empty(stack, first)) return;
  torch::jit::Stack cpu_stack;
  cpu_stack.reserve(n);
  for (std::size_t i = first; i < stack.size(); ++i) {
    cpu_stack.push_back(map_tensors(stack[i], [](const at::Tensor& t) {
      if (!t.defined()) return t;
      return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kCPU));
    }));
  }
  op.callBoxed(&cpu_stack);  // throws CPU's error; the results are discarded
}

}  // namespace vdev::backend
