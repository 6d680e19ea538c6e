#include "backend/executor/operator_task.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/alias.h>
#include <ATen/ops/empty.h>

#include <stdexcept>

#include "backend/common/tensor_args.h"
#include "backend/executor/out_variants.h"
#include "backend/random/keyed_engine.h"

namespace vdev::backend {
namespace {

void copy_result(at::Tensor dst, const at::Tensor& src) {
  TORCH_CHECK(dst.sizes() == src.sizes(), "the meta kernel predicted an output of shape ",
              dst.sizes(), " but the CPU kernel produced ", src.sizes());
  dst.copy_(src);
}

// Copies every tensor of `src` into the matching tensor of `dst` (fresh-output aliases).
void copy_results(const std::vector<c10::IValue>& dst, const torch::jit::Stack& src) {
  for (std::size_t i = 0; i < dst.size(); ++i) {
    if (dst[i].isTensor() && dst[i].toTensor().defined()) {
      // An undefined return where the plan allocated one (flags CPU's kernel alone reads): the
      // output is left as it is, as the operator computes nothing there.
      if (!src[i].isTensor() || !src[i].toTensor().defined()) continue;
      copy_result(dst[i].toTensor(), src[i].toTensor());
    } else if (dst[i].isTensorList()) {
      const auto ds = dst[i].toTensorVector();
      const auto ss = src[i].toTensorVector();
      TORCH_CHECK(ds.size() == ss.size(), "the meta kernel predicted ", ds.size(),
                  " outputs but the CPU kernel produced ", ss.size());
      for (std::size_t k = 0; k < ds.size(); ++k) copy_result(ds[k], ss[k]);
    }
  }
}

// Whether `written` still sees the bytes of `device_alias` the way the device tensor does. Some
// out= kernels restride their out tensor (CPU's reflection and replication pads resize it to the
// input's memory format) and then write that layout into bytes the device tensor reads in its own.
// Strides of size-1 dimensions do not matter.
bool kept_layout(const at::Tensor& written, const at::Tensor& device_alias) {
  if (written.data_ptr() != device_alias.data_ptr() || written.sizes() != device_alias.sizes()) {
    return false;
  }
  for (int64_t d = 0; d < written.dim(); ++d) {
    if (written.size(d) > 1 && written.stride(d) != device_alias.stride(d)) return false;
  }
  return true;
}

// After an out= kernel wrote through `written[k]` (aliases of `device_alias(k)`'s bytes): puts
// what a restrided one wrote into the device layout; whether any was restrided.
template <typename DeviceAlias>
bool restore_layouts(const c10::SmallVector<at::Tensor, 2>& written, DeviceAlias device_alias) {
  bool restored = false;
  for (std::size_t k = 0; k < written.size(); ++k) {
    const at::Tensor& device = device_alias(k);
    if (kept_layout(written[k], device)) continue;
    const at::Tensor values = written[k].clone();  // the same bytes: read them all before writing
    copy_result(device, values);
    restored = true;
  }
  return restored;
}

// A vdev tensor as a CPU alias of its device bytes; a CPU tensor as a snapshot. A wrapped number
// (a Python scalar: `t - 0.3`) stays one: it takes part in type promotion below a 0-dim tensor,
// and as a plain 0-dim double tensor it would make a 0-dim float tensor compute in double.
at::Tensor alias_or_snapshot(const at::Tensor& t) {
  if (!t.defined()) return t;
  if (is_vdev_tensor(t)) return cpu_alias(t);
  at::Tensor snapshot = t.clone();
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
    snapshot.unsafeGetTensorImpl()->set_wrapped_number(true);
  }
  return snapshot;
}

}  // namespace

OperatorTask::OperatorTask(const c10::OperatorHandle& op, std::shared_ptr<const LaunchPlan> plan,
                           const torch::jit::Stack& stack, std::size_t first,
                           const std::vector<c10::IValue>& outputs, std::optional<RandomDraw> draw)
    : op_(op), plan_(std::move(plan)), draw_(draw) {
  const LaunchPlan& p = *plan_;
  TORCH_INTERNAL_ASSERT(p.generator_arg.has_value() == draw.has_value());
  args_.reserve(stack.size() - first);
  for (std::size_t i = first; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (p.generator_arg && i - first == *p.generator_arg) {
      args_.emplace_back();  // placeholder: the keyed engine, made on the worker
    } else if (v.isTensor() && is_vdev_tensor(v.toTensor())) {
      arg_specs_.emplace_back();
      arg_specs_.back().first = i - first;
      arg_specs_.back().second.set(v.toTensor());
      args_.emplace_back();  // placeholder
    } else {
      args_.push_back(map_tensors(v, alias_or_snapshot));
    }
  }
  if (p.all_fresh && !outputs.empty()) {
    fresh_outputs_ = true;
    use_out_op_ = p.out_op.has_value() && !p.out_refused.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const c10::IValue& o = outputs[i];
      output_specs_.emplace_back();
      if (o.isTensor() && is_vdev_tensor(o.toTensor())) {
        output_specs_.back().emplace().set(o.toTensor());
      } else {
        host_outputs_.resize(outputs.size());  // only when some return needs it
        host_outputs_[i] = map_tensors(o, alias_or_snapshot);
      }
    }
  }
}

void OperatorTask::operator()() { run(); }  // queue_launch maps its errors

void OperatorTask::run() {
  const torch::jit::Stack made = make_args();
  if (!fresh_outputs_) {  // in-place / out=: writes through the argument aliases
    run_mutating(op_, *plan_, made);
    return;
  }
  std::vector<c10::IValue> outputs =
      host_outputs_.empty() ? std::vector<c10::IValue>(output_specs_.size()) : host_outputs_;
  for (std::size_t i = 0; i < output_specs_.size(); ++i) {
    if (output_specs_[i]) outputs[i] = output_specs_[i]->make();
  }
  run_fresh(op_, *plan_, made, outputs, use_out_op_);
}

torch::jit::Stack OperatorTask::make_args() const {
  torch::jit::Stack stack(args_.begin(), args_.end());
  place_aliases(arg_specs_, stack);
  if (draw_) stack[*plan_->generator_arg] = cpu_generator_for(*draw_);
  return stack;
}

namespace {

// Calls of `plan` use the functional form (or resizable temporaries) from now on.
void refuse(const LaunchPlan& plan, const c10::OperatorHandle& out_overload) {
  plan.out_refused.store(true, std::memory_order_relaxed);
  remember_refused_out_overload(out_overload);
}

}  // namespace

void run_fresh(const c10::OperatorHandle& op, const LaunchPlan& plan, const torch::jit::Stack& made,
               const std::vector<c10::IValue>& outputs, bool use_out_op) {
  torch::jit::Stack stack = made;
  if (use_out_op) {
    // Separate alias objects: an out= kernel may resize them before failing, and `outputs` must
    // keep the device allocations' metadata for the fallback below.
    for (const c10::IValue& v : plan.out_extra_args) stack.push_back(v);
    c10::SmallVector<at::Tensor, 2> written;
    for (const auto& o : outputs) {
      written.push_back(at::alias(o.toTensor()));
      stack.push_back(written.back());
    }
    try {
      plan.out_op->callBoxed(&stack);
      if (restore_layouts(
              written, [&](std::size_t k) -> const at::Tensor& { return outputs[k].toTensor(); })) {
        // Calls of this plan use the functional form and a copy from now on.
        plan.out_refused.store(true, std::memory_order_relaxed);
      }
      return;
    } catch (const c10::Error& e) {
      if (!out_overload_refused(e)) throw;
      refuse(plan, *plan.out_op);  // use the functional form from now on
    }
    stack = made;
  }
  op.callBoxed(&stack);
  copy_results(outputs, stack);
}

// Some out= kernels refuse fixed device aliases as outputs (out_overload_refused: mse_loss.out
// with a reduction resizes them to an intermediate shape): they get resizable CPU temporaries,
// copied into the device outputs afterwards.
void run_mutating(const c10::OperatorHandle& op, const LaunchPlan& plan,
                  const torch::jit::Stack& made) {
  torch::jit::Stack stack = made;
  const std::vector<std::size_t>& out_args = plan.out_args;
  if (!out_args.empty() && !plan.out_refused.load(std::memory_order_relaxed)) {
    c10::SmallVector<at::Tensor, 2> written;
    for (std::size_t j : out_args) {
      written.push_back(at::alias(made[j].toTensor()));  // own metadata
      stack[j] = written.back();
    }
    try {
      op.callBoxed(&stack);
      if (restore_layouts(written, [&](std::size_t k) -> const at::Tensor& {
            return made[out_args[k]].toTensor();
          })) {
        plan.out_refused.store(true, std::memory_order_relaxed);  // temporaries from now on
      }
      return;
    } catch (const c10::Error& e) {
      if (!out_overload_refused(e)) throw;
      refuse(plan, op);
    }
    stack = made;
  } else if (out_args.empty()) {
    op.callBoxed(&stack);
    return;
  }
  std::vector<at::Tensor> temps;
  for (std::size_t j : out_args) {
    // Zero elements: a kernel resizes such an output silently, where resizing one with elements
    // prints PyTorch's deprecation warning.
    temps.push_back(at::empty({0}, made[j].toTensor().options()));
    stack[j] = temps.back();
  }
  op.callBoxed(&stack);
  for (std::size_t k = 0; k < out_args.size(); ++k) {
    copy_result(made[out_args[k]].toTensor(), temps[k]);
  }
}

}  // namespace vdev::backend
