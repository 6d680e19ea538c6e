// CPU's argument checks at the call, for operators that run later on a stream worker.
//
// A queued operator runs CPU's kernel on the worker; the checks in that kernel (dtype dispatch,
// "expected scalar type Float but found Double", "boundaries tensor must be 1 dimension", ...)
// would then fail at some later synchronize, where CUDA raises them on the host at the call (its
// kernels check their arguments before launching). The meta kernel run for the launch plan has
// checked the sizes already; these checks are the rest.
//
// So, once per launch plan (plans are cached by call signature), CPU's kernel is run on the
// calling thread on *stand-ins*: CPU tensors of the arguments' dtypes and dims, holding 1
// (floating and complex) or 0 (integers, bool: a valid index, a false mask). Scalars, lists and
// CPU arguments are the call's own. A first round uses small stand-ins: every size of the call's
// vdev tensors is replaced by the smallest value that keeps the sizes' order and equalities (0 and
// 1 stay, the others become 2, 3, ...), so they are cheap, and whatever depends only on dtypes,
// dims, flags and which sizes equal which (broadcasting, index shapes against each other and the
// value) is decided exactly as CPU decides it for the real call. Small stand-ins fail many size
// checks that the real sizes pass (a pooling kernel of 3, a layer norm over 768 features, groups,
// k of topk), so a failed first round is repeated with stand-ins of the real sizes (and memory
// format), when they hold at most 2^24 elements in all.
//
// Stand-ins can still fail where the real arguments would not (an integer division by the
// stand-in's 0, arguments too large for the second round), so a failed check raises nothing
// itself: the plan is marked, and the call runs synchronously on its real arguments
// (backend/ops/fallback.cpp, on CPU aliases of the device bytes), which raises CPU's error at the
// call with CPU's Python type, or succeeds and clears the mark, so the next such call is queued
// again. In a sync debug mode ("warn", "error") that synchronous run would be a host wait vdev
// added: there the call is queued as before, and a real error comes at the next synchronize.
//
// Not checked (the call queues at once, errors come at a synchronize as before):
//  * operators outside the aten namespace (a custom operator's kernel may have side effects);
//  * backward operators: they trust sizes that the forward checked, and a small stand-in against
//    the forward's lengths (ctc_loss's input_lengths) would make CPU's kernel read out of bounds;
//  * random operators without a Generator argument: the trial would draw from CPU's default
//    generator. With one, the trial gets a private generator;
//  * assertions (_assert_async): the stand-in's 0 fails them, and CUDA queues them.
// Operators with a kernel_size argument skip the small round: CPU's slow_conv_transpose2d/3d and
// slow_conv3d trust kernel_size against the weight's sizes and would read out of bounds.
// Warnings raised by a trial are dropped (the real run raises them again); a TORCH_WARN_ONCE
// reached first by a trial is spent there.
//
// Thread rules: stateless; runs on the dispatching thread while a launch plan is made.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
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

// How many warnings the trials on the calling thread have dropped so far: a plan whose trial
// warned runs on the host (executor/launch_plan.h, warns_on_host), where the kernel's warning
// reaches the caller at the call, as a CUDA operator's host-side TORCH_WARN does.
std::uint64_t trial_warnings_dropped();

// Whether a failed check may be settled now by running the call synchronously on its real
// arguments: not in a sync debug mode.
bool may_settle_on_the_host();

// A stand-in for `like` with the given sizes: a CPU tensor of its dtype (and conj/neg bits),
// holding 1 (floating and complex) or 0.
at::Tensor stand_in_like(const at::Tensor& like, at::IntArrayRef sizes);

// Whether stand-ins of the real sizes holding `elements` in all are small enough for a trial.
bool full_size_trial_affordable(int64_t elements);

// The sizes CPU's kernel runs a layout trial with (run_on_layout_stand_ins).
enum class TrialSizes { kSmall, kReal };

// Whether CPU's kernel may run on stand-ins of stack[first, first + nargs) with `sizes`: the
// operator is an aten one, no assertion, and draws nothing from CPU's default generator; small
// sizes only where the argument check above would use them (no backward operator, no
// kernel_size, no CPU integer tensor), real ones only within the second round's budget
// (`output_elements` counts towards it).
bool layout_trial_may_run(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                          std::size_t first, std::size_t nargs, TrialSizes sizes,
                          int64_t output_elements);

// CPU's kernel run once on stand-ins that keep each vdev argument's layout: of the real sizes,
// its exact strides if it is non-overlapping and dense; otherwise its broadcast dimensions
// (stride 0) broadcast and the others dense in the order of its strides (the small sizes keep
// which sizes are 0 and 1, and the stand-ins every order between the strides of two dimensions
// of more than one element, or none is made). The returns; nullopt when no stand-in could be
// made or the kernel failed. Warnings dropped; not profiled.
std::optional<torch::jit::Stack> run_on_layout_stand_ins(const c10::OperatorHandle& op,
                                                         const torch::jit::Stack& stack,
                                                         std::size_t first, std::size_t nargs,
                                                         TrialSizes sizes);

// Runs `trial` with its warnings dropped (nondeterminism alerts included); whether it returned
// without throwing.
bool trial_succeeds(const std::function<void()>& trial);

}  // namespace vdev::backend
