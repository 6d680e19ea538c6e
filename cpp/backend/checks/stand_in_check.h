// CPU's argument checks at the call, for operators that run later on a stream worker.
//
// A queued operator runs CPU's kernel on the worker; the checks in that kernel (dtype dispatch,
// "expected scalar type Float but found Double", "boundaries tensor must be 1 dimension", ...)
// would then fail at some later synchronize, where CUDA raises them on the host at the call (its
// kernels check their arguments before launching). The meta kernel run for the launch plan has
// checked the sizes already; these checks are the rest.
//
// So, once per launch plan (plans are cached by call signature), CPU's kernel is run on the
// calling thread on stand-ins of the arguments (common/stand_in_trials.h): first small ones; when
// CPU refuses those (small stand-ins fail many size checks the real sizes pass: a pooling kernel
// of 3, a layer norm over 768 features, topk's k), stand-ins of the real sizes, within their
// budget. A convolution's first round has its own stand-ins (checks/conv_stand_ins.h: one channel
// per group, the smallest spatial size with an output), which small sizes cannot be for a grouped
// convolution.
//
// Stand-ins can still fail where the real arguments would not (an integer division by the
// stand-in's 0, arguments too large for the second round), so a failed check raises nothing
// itself: the plan is marked, and the call runs synchronously on its real arguments
// (executor/enqueue.h, settle_on_the_host: on CPU aliases of the device bytes), which raises CPU's
// error at the call with CPU's Python type, or succeeds and clears the mark, so the next such call
// is queued again. In a sync debug mode ("warn", "error") that synchronous run would be a host
// wait vdev added: there the call is queued as before, and a real error comes at the next
// synchronize.
//
// Not checked (the call queues at once, errors come at a synchronize as before): the operators no
// trial may run for (common/stand_in_trials.h), and backward operators: they trust sizes that the
// forward checked.
//
// Thread rules: stateless; runs on the dispatching thread while a launch plan is made.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vdev::backend {

// Whether CPU's kernel accepts stand-ins of stack[first, first + nargs) (true also when the
// operator is not checked, see above); `output_elements` (from the meta kernel) counts towards the
// second round's budget. When a trial ran and passed, `undefined_returns` (if given) gets, per
// return, whether CPU's kernel returned an undefined tensor there (the weights of
// _native_multi_head_attention without need_weights, where the meta kernel says [0]): that
// depends on flags, not values, so the call returns undefined there too, as on CPU and CUDA.
bool cpu_accepts_stand_ins(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                           std::size_t first, std::size_t nargs, int64_t output_elements,
                           std::vector<bool>* undefined_returns = nullptr);

// Whether a failed check may be settled now by running the call synchronously on its real
// arguments: not in a sync debug mode.
bool may_settle_on_the_host();

}  // namespace vdev::backend
