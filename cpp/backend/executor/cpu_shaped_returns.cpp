#include "backend/executor/cpu_shaped_returns.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include <string>
#include <unordered_set>
#include <vector>

#include "backend/executor/tensor_args.h"

namespace vdev::backend {
bool returns_shaped_by_cpu(const c10::FunctionSchema& schema) {
  static const std::unordered_set<std::string> ops = {
      "aten::native_batch_norm",
      "aten::_native_batch_norm_legit",
      "aten::_native_batch_norm_legit_no_training",
      "aten::_batch_norm_with_update",
      "aten::_batch_norm_no_update",
  };
  return ops.count(schema.name()) != 0;
}

void shape_returns_as_cpu(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                          std::size_t first, std::size_t nargs, LaunchPlan& plan) {
  plan.ok = false;
  const c10::IValue& input_value = stack[first];
  if (!input_value.isTensor() || input_value.toTensor().dim() < 2) return;
  const at::Tensor& input = input_value.toTensor();
  const int64_t channels = input.size(1);
  const at::AutoDispatchBelowADInplaceOrView below_autograd;

  // The probe: input [2, C, 1, ...] of the input's dtype; every other tensor argument (weight,
  // bias, running statistics: all [C]) a CPU tensor of its own dtype; other arguments as given.
  std::vector<int64_t> probe_sizes(static_cast<std::size_t>(input.dim()), 1);
  probe_sizes[0] = 2;
  probe_sizes[1] = channels;
  torch::jit::Stack probe;
  probe.reserve(nargs);
  probe.emplace_back(at::zeros(probe_sizes, at::TensorOptions().dtype(input.scalar_type())));
  for (std::size_t i = first + 1; i < first + nargs; ++i) {
    probe.push_back(map_tensors(stack[i], [](const at::Tensor& t) {
      if (!t.defined()) return t;
      return at::ones(t.sizes(), at::TensorOptions().dtype(t.scalar_type()));
    }));
  }
  try {
    op.callBoxed(&probe);
  } catch (const std::exception&) {
    return;  // CPU rejects the probe: the call runs synchronously and raises CPU's error
  }
  if (probe.size() != plan.returns.size()) return;
  for (std::size_t r = 0; r < probe.size(); ++r) {
    if (!probe[r].isTensor()) return;
    const at::Tensor& t = probe[r].toTensor();
    MetaReturn& ret = plan.returns[r];
    ret.kind = MetaReturn::Tensor;
    ret.tensors.assign(1, describe(t));
    if (r == 0) {  // the normalized output: the input's sizes, in the format CPU gives it
      const at::Tensor like =
          at::empty(input.sizes(), at::TensorOptions().dtype(t.scalar_type()).device(c10::kMeta),
                    input.suggest_memory_format());
      ret.tensors[0] = describe(like);
    }
  }
  plan.ok = true;
}

}  // namespace vdev::backend
