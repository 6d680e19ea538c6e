// Trials of CPU's kernels on stand-ins: CPU tensors that stand for a call's vdev arguments, so
// that what CPU's kernel decides from dtypes, dims, flags and layouts is learnt on the host, once
// per call signature, without touching device memory. The argument check at the call
// (checks/stand_in_check.h), the out= layout check (executor/out_kernel_layouts.h) and the dropout
// kernel's dtype check (ops/dropout.cpp) are built on them.
//
// A stand-in has its tensor's dtype (and conj/neg bits) and holds 1 (floating and complex) or 0
// (integers, bool: a valid index, a false mask). Scalars, lists and CPU arguments are the call's
// own. Two sizes of trial:
//  * small (TrialSizes::kSmall): every size of the call's vdev tensors replaced by the smallest
//    value that keeps the sizes' order and equalities (0 and 1 stay, the others become 2, 3, ...),
//    so they are cheap, and whatever depends only on dtypes, dims, flags and which sizes equal
//    which (broadcasting, index shapes against each other) is decided exactly as for the real
//    call. Unsafe where a kernel trusts sizes it did not check: backward operators (they trust
//    the forward's: a small stand-in against ctc_loss's input_lengths reads out of bounds), a
//    kernel_size argument (CPU's slow_conv_transpose2d/3d and slow_conv3d run gemm over it), a
//    CPU integer tensor's values (_unsafe_index): such calls have no small trial.
//  * real (TrialSizes::kReal): stand-ins of the real sizes (and memory format), when they hold at
//    most 2^24 elements in all (inputs and outputs): the whole operator computed once on the host.
// No trial at all for operators outside the aten namespace (a custom operator's kernel may have
// side effects), assertions (_assert_async: the stand-in's 0 fails them) and random operators
// without a Generator argument (the trial would draw from CPU's default generator; with one, the
// trial gets a private generator).
// Trials run below autocast, unprofiled, with their warnings dropped and counted (a TORCH_WARN_ONCE
// reached first by a trial is spent there).
//
// Thread rules: stateless but for a thread-local count of dropped warnings; runs on the
// dispatching thread.
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

// The sizes a trial runs with (see above).
enum class TrialSizes { kSmall, kReal };

// Whether CPU's kernel may run on stand-ins of any size: an aten operator, no assertion, nothing
// drawn from CPU's default generator.
bool may_run_on_stand_ins(const c10::OperatorHandle& op);

// Whether the operator is a backward one (it trusts sizes that its forward checked).
bool is_backward_operator(const c10::OperatorHandle& op);

// Whether CPU's kernel may run on stand-ins of stack[first, first + nargs) with `sizes`: small
// ones only where they are safe (see above), real ones only within the budget (`output_elements`
// counts towards it).
bool trial_may_run(const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::size_t first,
                   std::size_t nargs, TrialSizes sizes, int64_t output_elements);

// CPU's kernel run once on stand-ins of `sizes` (the caller has asked trial_may_run); whether it
// accepted them. On success, `undefined_returns` (if given) gets, per return, whether CPU's kernel
// returned an undefined tensor there.
bool run_on_stand_ins(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                      std::size_t first, std::size_t nargs, TrialSizes sizes,
                      std::vector<bool>* undefined_returns);

// CPU's kernel run once on stand-ins that keep each vdev argument's layout: of the real sizes,
// its exact strides if it is non-overlapping and dense; otherwise its broadcast dimensions
// (stride 0) broadcast and the others dense in the order of its strides (the small sizes keep
// which sizes are 0 and 1, and the stand-ins every order between the strides of two dimensions
// of more than one element, or none is made). The returns; nullopt when no stand-in could be
// made or the kernel failed.
std::optional<torch::jit::Stack> run_on_layout_stand_ins(const c10::OperatorHandle& op,
                                                         const torch::jit::Stack& stack,
                                                         std::size_t first, std::size_t nargs,
                                                         TrialSizes sizes);

// A stand-in for `like` with the given sizes, for trials an operator's own kernel makes
// (convolutions, dropout): a contiguous CPU tensor of its dtype (and conj/neg bits), holding 1
// (floating and complex) or 0.
at::Tensor stand_in_like(const at::Tensor& like, at::IntArrayRef sizes);

// Whether stand-ins of the real sizes holding `elements` in all are small enough for a trial.
bool full_size_trial_affordable(int64_t elements);

// Runs `trial` with its warnings dropped (nondeterminism alerts included); whether it returned
// without throwing.
bool trial_succeeds(const std::function<void()>& trial);

// How many warnings the trials on the calling thread have dropped so far.
std::uint64_t trial_warnings_dropped();

}  // namespace vdev::backend
