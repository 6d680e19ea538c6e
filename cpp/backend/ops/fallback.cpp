// The boxed kernel for every aten operator without a dedicated vdev kernel.
//
// First choice: the asynchronous executor (backend/executor/enqueue.h) queues the operator on the
// current stream of its device. When it declines (data-dependent shapes, non-tensor results, ...,
// or CPU's argument checks failed on stand-ins, backend/executor/stand_in_check.h), the
// synchronous path runs it on CPU copies of its vdev arguments
// (at::native::cpu_fallback) and copies the results back, with these rules on top:
//  * it first waits for the current stream of the arguments' device (it runs synchronously);
//  * a DeviceGuard on the arguments' vdev device, so that outputs, out= resizes and temporaries are
//    allocated on the tensor's device, not the caller's current device;
//  * arguments on two different vdev devices are an error, as on CUDA, instead of silently working;
//  * view operators cannot fall back (a CPU copy cannot alias device storage): error_on_views makes
//    that a clear error instead of a silent copy.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>

#include "backend/common/alert_filter.h"
#include "backend/common/optional_tensor_lists.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/sync_debug.h"
#include "backend/executor/enqueue.h"
#include "backend/executor/host_checked_results.h"
#include "backend/executor/launch_plan.h"
#include "backend/ops/aliased_call.h"
#include "backend/ops/device_rules.h"
#include "backend/ops/empty_inputs.h"
#include "backend/ops/index_masks.h"
#include "backend/ops/missing_cuda_kernels.h"
#include "backend/ops/nondeterministic_alerts.h"
#include "backend/random/generator.h"
#include "backend/random/keyed_engine.h"

namespace vdev::backend {
namespace {

// A random operator that runs synchronously draws as a queued one does: its Generator argument
// becomes a CPU engine keyed by a draw from the device's generator (backend/random/).
void key_generator_argument(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                            const std::optional<c10::Device>& device) {
  const std::optional<std::size_t> g = generator_argument(op.schema());
  if (!g) return;
  c10::IValue& arg = (*stack)[stack->size() - op.schema().arguments().size() + *g];
  // No vdev tensor: a CPU operator that reached vdev only through a vdev generator's dispatch key.
  TORCH_CHECK(device.has_value(), "Expected a 'cpu' device type for generator but found '",
              c10::DeviceType::PrivateUse1, "'");
  const c10::DeviceIndex index = device->has_index() ? device->index() : -1;
  arg = cpu_generator_for(reserve_draw(arg.toOptional<at::Generator>(), index));
}

void vdev_boxed_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  canonicalize_optional_tensor_lists(op, *stack);  // TorchScript's x[m]
  const std::optional<c10::Device> device = check_operator_devices(op, *stack);
  if (device) refuse_what_cuda_cannot_run(op, *stack);
  expand_index_masks(op, *stack);  // x[mask]: the mask's indices, as CUDA makes them
  check_like_cpu_when_inputs_are_empty(op, *stack);
  alert_where_cuda_is_nondeterministic(op, *stack);
  const c10::OptionalDeviceGuard guard(device);
  const bool overlapping = device && device->has_index() && written_arguments_overlap(op, *stack);
  std::shared_ptr<const LaunchPlan> to_settle;
  if (!overlapping && device && device->has_index()) {
    EnqueueOutcome queued = try_enqueue_operator(op, stack, *device);
    if (queued.queued) return;
    to_settle = std::move(queued.to_settle);
  }
  // Synchronous from here on: reported (and in "error" mode refused) before drawing from the
  // device's generator or waiting.
  if (device) {
    note_synchronizing_operation(op.schema().name().c_str(),
                                 device->has_index() ? device->index() : -1);
  }
  key_generator_argument(op, stack, device);
  const SilenceNondeterminismAlerts alerted_at_the_call;  // CPU's kernel would repeat vdev's
  if (overlapping) {
    run_on_shared_aliases(op, stack, *device);
    return;
  }
  if (to_settle) {
    // CPU's checks failed on stand-ins: CPU's kernel on the real arguments, on the host (on CPU
    // aliases, so an input that is also out= is seen as such), raises CPU's error at the call; if
    // it succeeds, the stand-ins were at fault and such calls are queued again.
    run_on_shared_aliases(op, stack, *device);
    to_settle->settle_on_host.store(false, std::memory_order_relaxed);
    return;
  }
  // Synchronous path: computes on the calling thread, so first wait for queued work.
  if (device) sync_current_stream(*device);
  check_before_cpu_lapack(op, *stack);
  const QuietSynchronizations quiet;  // its copies to and from the host were just noted with it
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&vdev_boxed_kernel>());
}

// Operators whose PrivateUse1 kernel would otherwise be ATen's CompositeExplicitAutograd "math"
// version, built on other operators: native_layer_norm and native_group_norm would go through
// native_batch_norm in training mode on reshaped inputs, which rounds differently from CPU's fused
// kernels (and synchronizes for half and bfloat16 inputs).
// Routed to the executor, they run CPU's own kernels asynchronously and match CPU bit for bit.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", torch::CppFunction::makeFromBoxedFunction<&vdev_boxed_kernel>());
  m.impl("native_group_norm", torch::CppFunction::makeFromBoxedFunction<&vdev_boxed_kernel>());
}

// The functional and in-place forms of structured operators (generated from native_functions.yaml,
// tools/gen_device_checks.py). ATen's default for them on a backend without its own kernel, the
// CompositeExplicitAutogradNonFunctional wrapper, runs the meta function on the device tensors and
// allocates the outputs before any device check, so a CPU argument ends in an internal assert
// ("structured kernels don't support multi-device outputs") instead of CUDA's error. Through this
// kernel they get the device rules first, and the executor plans them like any other operator.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  static const char* const kStructuredDelegates[] = {
#include "structured_delegates.inc"
  };
  for (const char* name : kStructuredDelegates) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&vdev_boxed_kernel>());
  }
}

}  // namespace vdev::backend
