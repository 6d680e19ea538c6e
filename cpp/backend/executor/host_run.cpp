#include "backend/executor/host_run.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>

#include <vector>

#include "backend/common/cpu_alias.h"
#include "backend/common/host_call.h"
#include "backend/common/launch.h"
#include "backend/common/operator_uses.h"
#include "backend/common/schema_arguments.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/sync_debug.h"
#include "backend/common/task.h"
#include "backend/common/tensor_args.h"
#include "backend/memory/storage_resize.h"

namespace vdev::backend {

void run_on_cpu_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                        c10::Device device) {
  sync_current_stream(device);        // reported by its caller
  const QuietSynchronizations quiet;  // its copies back are part of this one operation
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  const c10::FunctionSchema& schema = op.schema();
  const std::size_t nargs = schema.arguments().size();
  const std::size_t first = stack->size() - nargs;
  // After the wait for the current stream: other streams' unordered work still conflicts.
  auto uses = [&](UseVisitor visit) { visit_operator_uses(op, *stack, first, {}, visit); };
  observe_host_run({schema.name().c_str(), LaunchUses::derived(uses)});

  SharedCpuAliases aliases;
  auto alias = [&](const at::Tensor& t) { return aliases.of(t); };
  // Written single tensors, to carry back what the kernel does to their metadata and storage.
  struct Written {
    at::Tensor device, cpu;
  };
  std::vector<Written> written;
  torch::jit::Stack cpu_stack;
  cpu_stack.reserve(nargs);
  for (std::size_t i = first; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (is_written(schema.arguments()[i - first]) && v.isTensor() && is_vdev_tensor(v.toTensor())) {
      written.push_back({v.toTensor(), alias(v.toTensor())});
      cpu_stack.emplace_back(written.back().cpu);
      continue;
    }
    cpu_stack.push_back(map_tensors(v, alias));
  }
  auto carry_back = [&] {
    for (const Written& w : written)
      aliases.carry_back(w.device, w.cpu, resize_storage_for_host_write);
  };
  call_on_host(op, stack, cpu_stack, carry_back, [&](const at::Tensor& t) {
    if (!t.defined()) return t;
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(device)).copy_(t);
  });
}

}  // namespace vdev::backend
