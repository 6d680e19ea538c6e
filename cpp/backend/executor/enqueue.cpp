#include "backend/executor/enqueue.h"

#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/checks/capability_rules.h"
#include "backend/checks/stand_in_check.h"
#include "backend/common/operator_uses.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/executor/host_run.h"
#include "backend/executor/launch_plan.h"
#include "backend/executor/operator_task.h"
#include "backend/executor/plan_cache.h"
#include "backend/memory/device_tensor.h"
#include "backend/memory/storage_resize.h"
#include "backend/random/generator.h"

namespace vdev::backend {
namespace {

// Resizes the written argument of return i to the size the meta kernel gave it (an out= tensor the
// operator resizes); returns that argument.
const c10::IValue& resize_written(const LaunchPlan& plan, const std::vector<MetaReturn>& returns,
                                  std::size_t i, const torch::jit::Stack& stack,
                                  std::size_t first) {
  const MetaReturn& m = returns[i];
  const c10::IValue& real = stack[first + static_cast<std::size_t>(plan.aliased[i])];
  // resize_output_check warns as CPU's and CUDA's structured out= kernels do ("An output with one
  // or more elements was resized ..."), at the call; the meta kernel's own warnings are not shown.
  // Reached with elements only in a sync debug mode (resizes_an_out_with_elements).
  if (real.isTensor() && m.kind == MetaReturn::Tensor && m.tensors[0].defined &&
      at::native::resize_output_check(real.toTensor(), m.tensors[0].sizes)) {
    const at::Tensor& out = real.toTensor();
    if (out.numel() == 0) {
      // An empty out= tensor takes the layout the kernel gives a resized output, as the meta
      // kernel computed it: TensorIterator restrides it to its inputs' permutation, so abs of a
      // transposed tensor (abs's functional form is abs.out into an empty tensor) is transposed
      // on CPU and CUDA.
      const c10::DeviceGuard guard(out.device());
      resize_tensor_impl(out.unsafeGetTensorImpl(), m.tensors[0].sizes, m.tensors[0].strides);
    } else {
      resize_vdev_tensor(out, m.tensors[0].sizes, std::nullopt);
    }
  }
  return real;
}

// Whether an out= tensor that holds elements has to be resized. Deprecated, and kernels differ in
// what they say about it: resize_output's "An output with one or more elements was resized",
// arange's own words, a silent resize_ (kthvalue, bernoulli, multinomial). Such a call runs CPU's
// kernel on the host, which says what it says at the call.
bool resizes_an_out_with_elements(const LaunchPlan& plan, const std::vector<MetaReturn>& returns,
                                  const torch::jit::Stack& stack, std::size_t first) {
  for (std::size_t i = 0; i < returns.size(); ++i) {
    if (plan.aliased[i] < 0) continue;
    const c10::IValue& real = stack[first + static_cast<std::size_t>(plan.aliased[i])];
    const MetaReturn& m = returns[i];
    if (real.isTensor() && m.kind == MetaReturn::Tensor && m.tensors[0].defined &&
        real.toTensor().numel() > 0 &&
        real.toTensor().sizes() != c10::IntArrayRef(m.tensors[0].sizes)) {
      return true;
    }
  }
  return false;
}

// The outputs of the call on the device (the caller's DeviceGuard): the mutated argument itself
// (resized when the operator resizes its out= tensor), or freshly allocated.
std::vector<c10::IValue> device_outputs(const LaunchPlan& plan,
                                        const std::vector<MetaReturn>& returns,
                                        const torch::jit::Stack& stack, std::size_t first) {
  std::vector<c10::IValue> outputs;
  outputs.reserve(returns.size());
  for (std::size_t i = 0; i < returns.size(); ++i) {
    const MetaReturn& m = returns[i];
    if (plan.aliased[i] >= 0) {
      outputs.push_back(resize_written(plan, returns, i, stack, first));
    } else if (m.kind == MetaReturn::None) {
      outputs.emplace_back();
    } else if (m.kind == MetaReturn::Tensor) {
      outputs.emplace_back(fresh_output(m.tensors[0]));
    } else {
      c10::List<at::Tensor> list;
      for (const MetaTensor& t : m.tensors) list.push_back(fresh_output(t));
      outputs.emplace_back(list);
    }
  }
  return outputs;
}

}  // namespace

at::Tensor fresh_output(const MetaTensor& m) {
  if (!m.defined) return at::Tensor();
  refuse_dtype_the_profile_lacks(m.dtype);  // VDEV_PROFILE=mps: no float64 result either
  return new_device_tensor(m.sizes, m.strides, m.dtype);
}

EnqueueOutcome try_enqueue_operator(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                                    c10::Device device) {
  const std::size_t nargs = op.schema().arguments().size();
  const std::size_t first = stack->size() - nargs;
  std::shared_ptr<const LaunchPlan> plan = find_or_make_plan(op, *stack, first, nargs);
  if (!plan->ok) return EnqueueOutcome::declined();
  // Outputs sized by a CPU tensor's values: this call's own metadata, never a cached one.
  std::optional<std::vector<MetaReturn>> call_returns;
  if (C10_UNLIKELY(plan->returns_from_cpu_values)) {
    call_returns = meta_returns(op, *stack, first, nargs);
    if (!call_returns || call_returns->size() != plan->returns.size()) {
      return EnqueueOutcome::declined();
    }
    mark_undefined_returns(*plan, *call_returns);
  }
  const std::vector<MetaReturn>& returns = call_returns ? *call_returns : plan->returns;
  // CPU's checks failed on stand-ins: settle it on the real arguments now, unless that would be a
  // host wait vdev adds in a sync debug mode (then queued, and a real error comes later).
  if (C10_UNLIKELY(plan->settle_on_host.load(std::memory_order_relaxed)) &&
      may_settle_on_the_host()) {
    // CPU's kernel resizes written arguments itself there.
    return EnqueueOutcome::to_settle(std::move(plan));
  }
  if (C10_UNLIKELY(
          plan->warns_on_host ||
          (!plan->all_fresh && resizes_an_out_with_elements(*plan, returns, *stack, first))) &&
      may_settle_on_the_host()) {
    return EnqueueOutcome::to_settle(std::move(plan));
  }

  // A random operator reserves its counter range now, in program order, before any side effect
  // (a generator of another device type is an error that must change nothing).
  std::optional<RandomDraw> draw;
  if (plan->generator_arg) {
    draw = reserve_draw((*stack)[first + *plan->generator_arg].toOptional<at::Generator>(),
                        device.index());
  }
  const c10::DeviceGuard guard(device);
  std::vector<c10::IValue> outputs = device_outputs(*plan, returns, *stack, first);
  // What the call reads and writes, for the launch observers only: its arguments by their alias
  // annotations, and its fresh outputs.
  auto uses = [&, &plan = *plan](UseVisitor visit) {
    c10::SmallVector<const c10::IValue*, 4> fresh;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      if (plan.aliased[i] < 0) fresh.push_back(&outputs[i]);
    }
    visit_operator_uses(op, *stack, first, fresh, visit);
  };
  const Launch launch{.stream = current_runtime_stream(device.index()),
                      .name = plan->task_name,
                      .uses = LaunchUses::derived(uses),
                      .elements = plan->size_hint};
  emplace_launch<OperatorTask>(launch, op, std::move(plan), *stack, first, outputs, draw);

  torch::jit::drop(*stack, nargs);
  for (auto& o : outputs) stack->push_back(std::move(o));
  return EnqueueOutcome::queued_call();
}

void settle_on_the_host(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::Device device,
                        const EnqueueOutcome& outcome) {
  TORCH_INTERNAL_ASSERT(outcome.must_settle());
  run_on_cpu_aliases(op, stack, device);  // raises CPU's error at the call
  // It succeeded: the stand-ins were at fault, and such calls are queued again.
  outcome.to_settle_->settle_on_host.store(false, std::memory_order_relaxed);
}

}  // namespace vdev::backend
