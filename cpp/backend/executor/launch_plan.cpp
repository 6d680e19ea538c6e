#include "backend/executor/launch_plan.h"

#include <ATen/TensorIterator.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/record_function.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "backend/checks/stand_in_check.h"
#include "backend/common/alert_filter.h"
#include "backend/common/meta_like.h"
#include "backend/common/schema_arguments.h"
#include "backend/common/stand_in_trials.h"
#include "backend/common/task.h"
#include "backend/common/tensor_args.h"
#include "backend/executor/allocated_layouts.h"
#include "backend/executor/cpu_shaped_returns.h"
#include "backend/executor/eligibility.h"
#include "backend/executor/out_kernel_layouts.h"
#include "backend/executor/out_variants.h"
#include "backend/executor/size_hint.h"

namespace vdev::backend {
namespace {

// CPU scalars stay on the CPU: meta kernels accept them, and some need their values.
at::Tensor to_meta(const at::Tensor& t) { return is_vdev_tensor(t) ? meta_like(t) : t; }

// Every defined tensor, CPU ones included: what the meta kernel can say from metadata alone.
at::Tensor to_meta_all(const at::Tensor& t) { return t.defined() ? meta_like(t) : t; }

// Runs the operator on its arguments with tensors mapped by `to_meta_fn`; the returns' metadata,
// or nullopt when the call failed or returned something other than tensors, tensor lists and None.
template <typename F>
std::optional<std::vector<MetaReturn>> run_meta(const c10::OperatorHandle& op,
                                                const torch::jit::Stack& stack, std::size_t first,
                                                std::size_t nargs, F to_meta_fn) {
  torch::jit::Stack meta_stack;
  meta_stack.reserve(nargs);
  const auto& args = op.schema().arguments();
  for (std::size_t i = first; i < first + nargs; ++i) {
    const c10::Argument& a = args[i - first];
    if (stack[i].isGenerator()) {
      meta_stack.emplace_back();  // meta kernels draw nothing
    } else if (is_written(a) && a.kwarg_only() && stack[i].isTensor() &&
               stack[i].toTensor().defined()) {
      // An out= argument as an empty tensor: the meta kernel sizes it without the resize warning
      // (a Python decomposition words it wrongly; the executor raises CPU's, resize_written).
      const at::Tensor& out = stack[i].toTensor();
      meta_stack.emplace_back(at::empty({0}, out.options().device(c10::kMeta)));
    } else {
      meta_stack.push_back(map_tensors(stack[i], to_meta_fn));
    }
  }
  // Meta functions may repeat CUDA's nondeterminism alerts, which vdev raised at the call. Those
  // written in C++ are dropped here; Python ones (histc, median: device_hint() takes a meta tensor
  // for a CUDA one) warn through their own binding's handler, which this cannot reach. Other
  // warnings are kept (a TORCH_WARN_ONCE spent here would never reach the user otherwise).
  const SilenceNondeterminismAlerts alerted_at_the_call;
  // vdev's own bookkeeping, not the program's operators: the profiler does not show it.
  const at::DisableRecordFunctionGuard unprofiled;
  try {
    op.callBoxed(&meta_stack);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::vector<MetaReturn> returns;
  for (const c10::IValue& v : meta_stack) {
    MetaReturn r;
    if (v.isNone()) {
      r.kind = MetaReturn::None;
    } else if (v.isTensor()) {
      r.kind = MetaReturn::Tensor;
      r.tensors.push_back(describe(v.toTensor()));
    } else if (v.isTensorList()) {
      r.kind = MetaReturn::TensorList;
      for (const at::Tensor& t : v.toTensorVector()) r.tensors.push_back(describe(t));
    } else {
      return std::nullopt;  // a non-tensor result: not asynchronously
    }
    returns.push_back(std::move(r));
  }
  return returns;
}

// Whether the returns' metadata depends on the values of a CPU tensor argument: the meta kernel
// cannot give it (or gives another) when those tensors are meta tensors too. Wrapped numbers
// (Python scalars) are values by design and are left out.
bool returns_depend_on_cpu_values(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                  std::size_t first, std::size_t nargs,
                                  const std::vector<MetaReturn>& with_cpu_values) {
  bool any_cpu = false;
  for (std::size_t i = first; i < first + nargs && !any_cpu; ++i) {
    any_cpu = any_tensor(stack[i], [](const at::Tensor& t) {
      return t.defined() && t.device().is_cpu() && !t.unsafeGetTensorImpl()->is_wrapped_number();
    });
  }
  if (!any_cpu) return false;
  const std::optional<std::vector<MetaReturn>> from_metadata =
      run_meta(op, stack, first, nargs, to_meta_all);
  return !from_metadata || *from_metadata != with_cpu_values;
}

// Operators not tagged pointwise whose CPU and CUDA kernels make their output with TensorIterator
// over two tensor arguments (schema positions, in the order the kernel adds them): their meta
// kernels (PyTorch's Python decompositions) lay it out by another argument. threshold_backward's
// kernel adds self before grad_output (TORCH_META_FUNC(threshold_backward) in Activation.cpp);
// the others add grad_output first.
struct IteratorInputs {
  std::string_view name;
  std::size_t first, second;
};
constexpr IteratorInputs kIteratorOperators[] = {
    {"aten::threshold_backward", 1, 0},   {"aten::elu_backward", 0, 5},
    {"aten::hardsigmoid_backward", 0, 1}, {"aten::hardswish_backward", 0, 1},
    {"aten::hardtanh_backward", 0, 1},    {"aten::softplus_backward", 0, 1},
};

const IteratorInputs* iterator_inputs(std::string_view name) {
  for (const IteratorInputs& op : kIteratorOperators) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

// The strides TensorIterator gives an output it allocates for these inputs (their permutation:
// abs of a transposed tensor is transposed), for the empty out= tensor of a pointwise operator,
// which CPU's and CUDA's TensorIterator kernels restride that way; the meta kernels of some
// (abs.out: a Python decomposition) resize it contiguously. nullopt when the inputs do not make
// an output of `sizes`.
std::optional<std::vector<int64_t>> pointwise_output_strides(const c10::FunctionSchema& schema,
                                                             const torch::jit::Stack& stack,
                                                             std::size_t first,
                                                             at::IntArrayRef sizes) {
  at::TensorIteratorConfig config;
  const at::TensorBase undefined;  // the output TensorIterator allocates
  config.set_check_mem_overlap(false)
      .check_all_same_dtype(false)
      .enforce_safe_casting_to_output(false)
      .add_output(undefined);
  bool any = false;
  const auto& args = schema.arguments();
  // The inputs in the order the kernel gives them to TensorIterator: the schema's, or the table's.
  std::vector<std::size_t> order;
  if (const IteratorInputs* listed = iterator_inputs(schema.name())) {
    order = {listed->first, listed->second};
  } else {
    order.resize(args.size());
    for (std::size_t i = 0; i < args.size(); ++i) order[i] = i;
  }
  for (std::size_t i : order) {
    if (i >= args.size() || is_written(args[i])) continue;
    for_each_tensor(stack[first + i], [&](const at::Tensor& t) {
      if (!t.defined() || t.dim() == 0) return;  // 0-dim: broadcast, no say in the layout
      // One dtype for all: the layout depends on each input's strides only, and TensorIterator
      // would refuse inputs of different dtypes (a mask and a gradient) without promoting them.
      config.add_owned_const_input(at::empty_strided(
          t.sizes(), t.strides(), t.options().device(c10::kMeta).dtype(at::kFloat)));
      any = true;
    });
  }
  if (!any) return std::nullopt;
  try {
    const at::TensorIterator iter = config.build();
    if (iter.output(0).sizes() != sizes) return std::nullopt;
    return iter.output(0).strides().vec();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Pointwise by TensorIterator on CPU and CUDA: the operators tagged pointwise, a few that are not
// tagged (found by tests/ops/opinfo_sweep.py with PyTorch's reference inputs), and the table's.
bool computed_by_tensor_iterator(const c10::OperatorHandle& op) {
  if (op.hasTag(at::Tag::pointwise)) return true;
  const std::string& name = op.schema().name();
  return name == "aten::complex" || name == "aten::polar" || name == "aten::floor_divide" ||
         iterator_inputs(name) != nullptr;
}

}  // namespace

std::optional<std::vector<MetaReturn>> meta_returns(const c10::OperatorHandle& op,
                                                    const torch::jit::Stack& stack,
                                                    std::size_t first, std::size_t nargs) {
  return run_meta(op, stack, first, nargs, to_meta);
}

bool mark_undefined_returns(const LaunchPlan& plan, std::vector<MetaReturn>& returns) {
  bool marked = false;
  for (std::size_t i : plan.undefined_returns) {
    MetaReturn& r = returns[i];
    if (r.kind == MetaReturn::Tensor && r.tensors[0].defined) {
      r.tensors[0].defined = false;
      marked = true;
    }
  }
  return marked;
}

std::shared_ptr<const LaunchPlan> make_launch_plan(const c10::OperatorHandle& op,
                                                   const torch::jit::Stack& stack,
                                                   std::size_t first, std::size_t nargs) {
  const c10::FunctionSchema& schema = op.schema();
  auto plan = std::make_shared<LaunchPlan>();
  if (!eligible(schema, stack, first)) return plan;  // ok = false
  plan->task_name = intern_task_name(schema.name());
  if (std::optional<std::vector<MetaReturn>> returns = meta_returns(op, stack, first, nargs)) {
    plan->ok = true;
    plan->returns_from_cpu_values = returns_depend_on_cpu_values(op, stack, first, nargs, *returns);
    plan->returns = std::move(*returns);
  }
  if (plan->ok && returns_shaped_by_cpu(schema)) {
    plan->ok = shape_returns_as_cpu(op, stack, first, nargs, plan->returns);
  }
  const auto& rets = schema.returns();
  if (!plan->ok || plan->returns.size() != rets.size()) {
    plan->ok = false;
    return plan;
  }
  std::size_t n_aliased = 0;
  for (const auto& r : rets) {
    const std::optional<std::size_t> j = written_argument(schema, r);
    plan->aliased.push_back(j ? static_cast<int>(*j) : -1);
    n_aliased += j ? 1 : 0;
  }
  if (n_aliased != 0 && n_aliased != rets.size()) {
    plan->ok = false;  // mixed fresh and mutated returns
    return plan;
  }
  plan->all_fresh = n_aliased == 0;
  plan->generator_arg = generator_argument(schema);
  plan->size_hint = size_hint(schema, stack, first, plan->returns);
  // A pointwise operator's outputs take TensorIterator's layout, which CPU's and CUDA's kernels
  // give them: fresh ones, and an empty out= tensor when resized. PyTorch's Python meta functions
  // say contiguous for some (copysign, xlogy: inputs of different layouts; abs.out: a transposed
  // input).
  const bool by_tensor_iterator = computed_by_tensor_iterator(op);
  if (by_tensor_iterator) {
    for (std::size_t i = 0; i < plan->returns.size(); ++i) {
      MetaReturn& m = plan->returns[i];
      if (m.kind != MetaReturn::Tensor || !m.tensors[0].defined) continue;
      if (plan->aliased[i] >= 0) {
        const c10::IValue& out = stack[first + static_cast<std::size_t>(plan->aliased[i])];
        if (!out.isTensor() || out.toTensor().numel() != 0) continue;  // not resized
        // An out= overload without a CPU kernel of its own is ATen's generated wrapper: the
        // functional kernel, then the empty out resized contiguously and a copy.
        if (!op.hasKernelForDispatchKey(c10::DispatchKey::CPU)) continue;
      }
      if (auto strides = pointwise_output_strides(schema, stack, first, m.tensors[0].sizes)) {
        m.tensors[0].strides = std::move(*strides);
      }
    }
  }
  for (std::size_t i = 0; i < plan->returns.size(); ++i) {
    MetaReturn& m = plan->returns[i];
    if (m.kind != MetaReturn::Tensor || !m.tensors[0].defined || plan->aliased[i] >= 0) continue;
    if (auto strides = allocated_output_strides(schema, stack, first, m.tensors[0].sizes)) {
      m.tensors[0].strides = std::move(*strides);
    }
  }
  if (plan->all_fresh && !rets.empty()) {
    bool single_tensors = true;
    for (const MetaReturn& m : plan->returns) {
      single_tensors &= m.kind == MetaReturn::Tensor && m.tensors[0].defined;
    }
    if (single_tensors) plan->out_op = out_variant_of(op);
    // CPU's batch norm out= kernel relies on its functional form to compute the mean of an input
    // that is contiguous in no memory format (batch_norm_cpu in Normalization.cpp): such inputs
    // run the functional kernel and a copy.
    if (returns_shaped_by_cpu(schema) && stack[first].isTensor()) {
      const at::Tensor& input = stack[first].toTensor();
      if (!input.is_contiguous(input.suggest_memory_format())) plan->out_op.reset();
    }
    if (plan->out_op && is_refused_out_overload(*plan->out_op)) plan->out_op.reset();
    // An out= overload without a CPU kernel of its own is ATen's generated composite (relu.out:
    // the functional kernel into a temporary, then a copy); an equivalent out= kernel is better.
    const bool composite_out =
        plan->out_op && !plan->out_op->hasKernelForDispatchKey(c10::DispatchKey::CPU);
    if (single_tensors && (!plan->out_op || composite_out)) {
      if (std::optional<EquivalentOut> eq = equivalent_out_kernel(op, stack, first)) {
        plan->out_op = eq->op;
        plan->out_extra_args = std::move(eq->extra_args);
      }
    }
  } else {
    const auto& sargs = schema.arguments();
    for (std::size_t j = 0; j < sargs.size(); ++j) {
      const c10::AliasInfo* a = sargs[j].alias_info();
      if (a != nullptr && a->isWrite() && sargs[j].kwarg_only() && stack[first + j].isTensor()) {
        plan->out_args.push_back(j);
      }
    }
    if (!plan->out_args.empty() && is_refused_out_overload(op)) plan->out_refused.store(true);
  }
  int64_t output_elements = 0;
  for (const MetaReturn& r : plan->returns) {
    for (const MetaTensor& t : r.tensors) {
      if (t.defined) output_elements += c10::multiply_integers(t.sizes);
    }
  }
  std::vector<bool> undefined;
  const std::uint64_t warned_before = trial_warnings_dropped();
  if (!cpu_accepts_stand_ins(op, stack, first, nargs, output_elements, &undefined)) {
    plan->settle_on_host.store(true);
  }
  plan->warns_on_host = trial_warnings_dropped() != warned_before;
  // Returns CPU's kernel leaves undefined (by flags) are undefined on vdev too, not allocated.
  for (std::size_t i = 0; i < undefined.size() && i < plan->returns.size(); ++i) {
    if (undefined[i] && plan->aliased[i] < 0) plan->undefined_returns.push_back(i);
  }
  if (mark_undefined_returns(*plan, plan->returns)) plan->out_op.reset();  // none has undefined
  // An out= kernel that trusts its own layout would write wrong values into outputs laid out
  // otherwise: the functional kernel and a copy then (executor/out_kernel_layouts.h).
  // TensorIterator's kernels write any out tensor's strides: theirs need no trial.
  if (plan->out_op && !by_tensor_iterator &&
      !out_kernel_keeps_layouts(op, stack, first, nargs, plan->returns, output_elements,
                                plan->returns_from_cpu_values)) {
    plan->out_op.reset();
    plan->out_extra_args.clear();
  }
  return plan;
}

}  // namespace vdev::backend
