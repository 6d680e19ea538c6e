// The boxed kernel for every aten operator without a dedicated vdev kernel, in three stages:
// check the call (backend/checks/call_checks.h), try to queue it, run it synchronously.
//
// First choice: the asynchronous executor (backend/executor/enqueue.h) queues the operator on the
// current stream of its device. When it declines (data-dependent shapes, non-tensor results, ...,
// or CPU's argument checks failed on stand-ins, backend/checks/stand_in_check.h), the
// synchronous path runs it on CPU copies of its vdev arguments
// (at::native::cpu_fallback) and copies the results back, with these rules on top:
//  * it first waits for the current stream of the arguments' device (it runs synchronously);
//  * a DeviceGuard on the arguments' vdev device, so that outputs, out= resizes and temporaries are
//    allocated on the tensor's device, not the caller's current device;
//  * arguments on two different vdev devices are an error, as on CUDA, instead of silently working;
//  * view operators cannot fall back (a CPU copy cannot alias device storage): error_on_views makes
//    that a clear error instead of a silent copy.
//
// The hottest operators (ExpressOperators below) have an unboxed kernel first: the express lane
// (backend/executor/express.h) queues the calls it can without boxing them, and hands the others
// to the boxed kernel.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/where_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_set>

#include "backend/checks/call_checks.h"
#include "backend/checks/host_checked_results.h"
#include "backend/checks/overlap.h"
#include "backend/common/alert_filter.h"
#include "backend/common/device_capability.h"
#include "backend/common/launch.h"
#include "backend/common/operator_uses.h"
#include "backend/common/schema_arguments.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/sync_debug.h"
#include "backend/common/task.h"
#include "backend/common/vdev_device.h"
#include "backend/executor/enqueue.h"
#include "backend/executor/express.h"
#include "backend/executor/host_run.h"
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
  TORCH_CHECK(device.has_value(), "Expected a 'cpu' device type for generator but found '", kVdev,
              "'");
  const c10::DeviceIndex index = device->has_index() ? device->index() : -1;
  arg = cpu_generator_for(reserve_draw(arg.toOptional<at::Generator>(), index));
}

// The third stage: a call the executor declined (or may not queue) runs on the calling thread.
void run_synchronously(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                       const CheckedCall& call, const EnqueueOutcome& outcome) {
  const std::optional<c10::Device>& device = call.device;
  // Reported (and in "error" mode refused) before drawing from the device's generator or waiting.
  if (device) {
    note_synchronizing_operation(op.schema().name().c_str(),
                                 device->has_index() ? device->index() : -1);
  }
  key_generator_argument(op, stack, device);
  const SilenceNondeterminismAlerts alerted_at_the_call;  // CPU's kernel would repeat vdev's
  if (call.overlapping || (device && written_arguments_share_storage(op, *stack))) {
    run_on_cpu_aliases(op, stack, *device);  // CPU's overlap checks see the shared storage
    return;
  }
  if (outcome.must_settle()) {
    settle_on_the_host(op, stack, *device, outcome);
    return;
  }
  // Computes on the calling thread, so first wait for queued work.
  if (device) sync_current_stream(*device);
  check_before_cpu_lapack(op, *stack);
  const QuietSynchronizations quiet;  // its copies to and from the host were just noted with it
  // Observers judge the call by its operator's rules, not by the copies that reach CPU's kernel
  // (which copy out= arguments in as if they were read): a whole call.
  const std::size_t first = stack->size() - op.schema().arguments().size();
  auto uses = [&](UseVisitor visit) { visit_operator_uses(op, *stack, first, {}, visit); };
  const HostRunScope whole_call(
      HostRun{.name = op.schema().name().c_str(), .uses = LaunchUses::derived(uses)});
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

// Three stages: check the call, try to queue it, run it synchronously.
void vdev_boxed_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const CheckedCall call = check_call(op, *stack);
  const c10::OptionalDeviceGuard guard(call.device);
  EnqueueOutcome outcome = EnqueueOutcome::declined();
  if (call.may_queue()) {
    outcome = try_enqueue_operator(op, stack, *call.device);
    if (outcome.queued()) return;
  }
  run_synchronously(op, stack, call, outcome);
}

// native_layer_norm on vdev returns mean and rstd in float for half and bfloat16 inputs, as CUDA's
// kernel and the meta function do; CPU's backward kernel insists that they have the input's dtype
// ("expected scalar type BFloat16 but found Float"). They are cast to it first (CPU's forward
// rounds them to that dtype too, so the gradients are CPU's).
void layer_norm_backward_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::size_t first = stack->size() - op.schema().arguments().size();
  const c10::IValue& input = (*stack)[first + 1];
  if (input.isTensor() && at::isReducedFloatingType(input.toTensor().scalar_type())) {
    const c10::ScalarType dtype = input.toTensor().scalar_type();
    for (const std::size_t stat : {first + 3, first + 4}) {  // mean, rstd
      c10::IValue& v = (*stack)[stat];
      if (v.isTensor() && v.toTensor().defined() && v.toTensor().scalar_type() != dtype) {
        v = v.toTensor().to(dtype);
      }
    }
  }
  vdev_boxed_kernel(op, stack);
}

// The express lane's kernels (executor/express.h): the hottest operators, unboxed. A call the lane
// declines takes the boxed kernel above, boxed as the dispatcher would have boxed it.
template <class Op, class Sig = typename Op::schema>
struct ExpressKernel;

template <class Op, class R, class... A>
struct ExpressKernel<Op, R(A...)> {
  static constexpr bool kInPlace = std::is_same_v<R, at::Tensor&>;

  static const ExpressOperator& op() {
    static const ExpressOperator o = [] {
      ExpressOperator made(
          c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name));
      TORCH_INTERNAL_ASSERT(made.writes_self == kInPlace, Op::name, ": in place?");
      return made;
    }();
    return o;
  }

  static R call(A... a) {
    UnboxedArgs args;
    (add_unboxed_arg(args, a), ...);
    at::Tensor result;
    if (try_express(op(), args, result)) {
      if constexpr (kInPlace) {
        return std::get<0>(std::forward_as_tuple(a...));
      } else {
        return result;
      }
    }
    static const c10::BoxedKernel boxed = c10::BoxedKernel::makeFromFunction<&vdev_boxed_kernel>();
    return c10::impl::BoxedKernelWrapper<R(A...)>::call(
        boxed, op().handle, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), a...);
  }

  // The name torch.library knows it by ("add.Tensor").
  static std::string name() {
    std::string n = std::string(Op::name).substr(std::string_view("aten::").size());
    if (*Op::overload_name != '\0') n += std::string(".") + Op::overload_name;
    return n;
  }
};

template <class... Ops>
struct ExpressKernels {
  static void register_all(torch::Library& m) {
    (m.impl(ExpressKernel<Ops>::name().c_str(), TORCH_FN(ExpressKernel<Ops>::call)), ...);
    (note_checked_kernel(ExpressKernel<Ops>::name()), ...);
  }
  static const std::unordered_set<std::string>& names() {
    static const std::unordered_set<std::string> all{ExpressKernel<Ops>::name()...};
    return all;
  }
};

// The operators of the express lane: element-wise arithmetic, comparisons and activations with
// their backwards, the commonest calls of eager training and inference. Each is a structured
// operator's functional or in-place form, or has no kernel but the boxed one (relu, where), so
// that its kernel for vdev was the boxed kernel before; none has a check the lane skips
// (executor/express.h).
using ExpressOperators = ExpressKernels<
    at::_ops::add_Tensor, at::_ops::add__Tensor, at::_ops::sub_Tensor, at::_ops::sub__Tensor,
    at::_ops::mul_Tensor, at::_ops::mul__Tensor, at::_ops::div_Tensor, at::_ops::div__Tensor,
    at::_ops::neg, at::_ops::relu, at::_ops::relu_, at::_ops::sigmoid, at::_ops::tanh,
    at::_ops::exp, at::_ops::log, at::_ops::sqrt, at::_ops::sqrt_, at::_ops::rsqrt,
    at::_ops::reciprocal, at::_ops::sin, at::_ops::cos, at::_ops::pow_Tensor_Scalar,
    at::_ops::maximum, at::_ops::minimum, at::_ops::eq_Tensor, at::_ops::ne_Tensor,
    at::_ops::lt_Tensor, at::_ops::gt_Tensor, at::_ops::le_Tensor, at::_ops::ge_Tensor,
    at::_ops::where_self, at::_ops::clamp, at::_ops::gelu, at::_ops::silu, at::_ops::addcmul_,
    at::_ops::addcdiv_, at::_ops::lerp__Scalar, at::_ops::threshold_backward,
    at::_ops::sigmoid_backward, at::_ops::tanh_backward, at::_ops::gelu_backward>;

// Registers `kernel` (the boxed kernel, or one that ends in it) for `name`, noted as a kernel that
// runs the checks at the call (common/device_capability.h).
void impl_checked(torch::Library& m, const char* name, torch::CppFunction kernel) {
  m.impl(name, std::move(kernel));
  note_checked_kernel(name);
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
// So do convolution and convolution_backward, whose composites would choose a backend by device
// and reach vdev as convolution_overrideable (ops/conv.cpp): as themselves they are planned like
// any operator and run CPU's convolution.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"convolution", "convolution_backward"}) {
    impl_checked(m, name, torch::CppFunction::makeFromBoxedFunction<&vdev_boxed_kernel>());
  }
  impl_checked(m, "native_layer_norm",
               torch::CppFunction::makeFromBoxedFunction<&vdev_boxed_kernel>());
  impl_checked(m, "native_group_norm",
               torch::CppFunction::makeFromBoxedFunction<&vdev_boxed_kernel>());
  impl_checked(m, "native_layer_norm_backward",
               torch::CppFunction::makeFromBoxedFunction<&layer_norm_backward_kernel>());
}

// Operators whose PrivateUse1 kernel would otherwise be a CompositeExplicitAutograd one that does
// what CUDA's own kernel does not (found by tests/ops/opinfo_sweep.py):
//  * out= forms whose composite writes a CPU out tensor through a cross-device copy_, where CUDA's
//    kernel refuses it ("Expected all tensors to be on the same device"): addr.out (math_addr_out),
//    all/any.dims_out, _chunk_cat.out (split_with_sizes_copy.out is not one: its out= is a tensor
//    list, which CPU's kernel would resize on a stream worker); and addr itself, whose composite
//    (math_addr) rounds half-precision products differently from the kernels;
//  * mode.values: its composite (mode_out) refuses every device but CPU, CUDA and XPU;
//  * conj_physical_: its composite calls conj_physical's DispatchStub for the tensor's device,
//    which has no vdev kernel (an internal assert).
// Through the boxed kernel they get the device rules and run CPU's kernel.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"addr", "addr.out", "all.dims_out", "any.dims_out", "_chunk_cat.out",
                           "mode.values", "conj_physical_"}) {
    impl_checked(m, name, torch::CppFunction::makeFromBoxedFunction<&vdev_boxed_kernel>());
  }
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { ExpressOperators::register_all(m); }

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
    if (ExpressOperators::names().count(name) != 0) continue;  // its express kernel instead
    impl_checked(m, name, torch::CppFunction::makeFromBoxedFunction<&vdev_boxed_kernel>());
  }
}

}  // namespace vdev::backend
