#include "backend/layouts/layout_host_run.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <vector>

#include "backend/common/host_call.h"
#include "backend/common/launch.h"
#include "backend/common/operator_uses.h"
#include "backend/common/schema_arguments.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/sync_debug.h"
#include "backend/common/task.h"
#include "backend/common/tensor_args.h"
#include "backend/layouts/layout_views.h"

namespace vdev::backend {
namespace {

// What the call reads and writes (an operator's rules for its arguments, common/operator_uses.h),
// in terms of the dense members of its tensors, for the launch observers.
void observe_call(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                  std::size_t first) {
  auto uses = [&](UseVisitor visit) {
    HeldUses found;
    for (std::size_t i = first; i < stack.size(); ++i) {
      const std::optional<Access> access = argument_access(op, stack, first, i - first);
      if (!access) continue;
      for_each_tensor(stack[i], [&](const at::Tensor& t) {
        if (!is_vdev_tensor(t)) return;
        for (at::Tensor& m : dense_members(t)) found.add(std::move(m), *access);
      });
    }
    found.visit(visit);
  };
  observe_host_run({op.schema().name().c_str(), LaunchUses::derived(uses)});
}

}  // namespace

void run_layout_op_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                           c10::Device device) {
  sync_current_stream(device);        // reported by its caller
  const QuietSynchronizations quiet;  // its copies back are part of this one operation
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  const c10::FunctionSchema& schema = op.schema();
  const std::size_t nargs = schema.arguments().size();
  const std::size_t first = stack->size() - nargs;
  observe_call(op, *stack, first);

  LayoutViews views;
  struct Written {
    at::Tensor device, cpu;
  };
  std::vector<Written> written;
  std::vector<at::Tensor> written_on_cpu;  // CPU quantized tensors the kernel may give a quantizer
  torch::jit::Stack cpu_stack;
  cpu_stack.reserve(nargs);
  for (std::size_t i = first; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (is_written(schema.arguments()[i - first]) && v.isTensor() && v.toTensor().defined() &&
        v.toTensor().is_quantized() && !is_vdev_tensor(v.toTensor())) {
      written_on_cpu.push_back(v.toTensor());
    }
    if (is_written(schema.arguments()[i - first]) && v.isTensor() && is_vdev_tensor(v.toTensor())) {
      written.push_back({v.toTensor(), views.of(v.toTensor())});
      cpu_stack.emplace_back(written.back().cpu);
      continue;
    }
    cpu_stack.push_back(map_tensors(v, [&](const at::Tensor& t) { return views.of(t); }));
  }
  auto carry_back = [&] {
    for (const Written& w : written) views.carry_back(w.device, w.cpu);
    // A CPU destination that took a vdev source's quantizer (copy_) owns its parameters.
    for (const at::Tensor& t : written_on_cpu) views.own_quantizer(t);
  };
  call_on_host(op, stack, cpu_stack, carry_back,
               [&](const at::Tensor& t) { return views.to_device(t, device); });
}

}  // namespace vdev::backend
