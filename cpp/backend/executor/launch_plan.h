// The launch plan of an operator call: everything the executor decides from the operator and its
// arguments' metadata, computed once per signature (and cached, backend/executor/plan_cache.h).
//
// Making a plan checks eligibility (backend/executor/eligibility.h), runs the operator on meta
// tensors (PyTorch's meta kernels; a Generator argument becomes None) to learn its outputs' sizes,
// strides and dtypes, and reads from the schema which returns are fresh outputs, which write an
// argument (in-place and out= operators) and which argument is a random operator's Generator. A
// plan with ok == false means "run synchronously"; it is cached too, so the operator is declined at
// once next time.
//
// Thread rules: make_launch_plan runs on the dispatching thread. A plan is immutable once made and
// shared by the cache and queued tasks, except `out_refused`, which a stream worker may set.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "backend/executor/return_metadata.h"

namespace vdev::backend {

struct LaunchPlan {
  bool ok = false;  // false: run synchronously (not eligible, meta call failed, mixed returns)
  std::vector<MetaReturn> returns;
  std::vector<int> aliased;                   // per return: the argument it writes, or -1 (fresh)
  bool all_fresh = false;                     // every return is a fresh output
  std::vector<std::size_t> out_args;          // kwarg-only written tensor arguments (out= ops)
  std::optional<c10::OperatorHandle> out_op;  // out= overload for all-fresh single-tensor returns
  std::vector<c10::IValue> out_extra_args;    // passed to out_op after the operator's arguments
  // The Generator argument of a random operator: the task computes with an engine keyed by the
  // draw reserved when it is queued (backend/random/generator.h), never with this argument.
  std::optional<std::size_t> generator_arg;
  // The output metadata depends on the values of a CPU tensor argument (x_vdev[cpu_bool_mask]:
  // the meta kernel computes the mask's nonzero on the CPU). Such a plan is cached for what it
  // decides from metadata (eligibility, the argument checks, out= overloads), and its `returns`
  // are made again for every call (meta_returns).
  bool returns_from_cpu_values = false;
  // Returns CPU's kernel leaves undefined for these flags (learnt on the stand-ins) although the
  // meta kernel describes a tensor: they are undefined on vdev too (mark_undefined_returns).
  std::vector<std::size_t> undefined_returns;
  // The operator's name for its tasks and errors (interned: outlives the operator's schema).
  const char* task_name = "";
  // Set (by a stream worker) once the out= kernel refused its outputs: the functional form plus a
  // copy is used from then on. Read on every launch without a lock.
  mutable std::atomic<bool> out_refused{false};
  // Set when CPU's kernel rejected stand-ins of the arguments (backend/checks/stand_in_check.h):
  // the next call runs synchronously on its real arguments, to raise CPU's error at the call; if
  // that run succeeds, the stand-ins were at fault and this is cleared (by the dispatching thread).
  mutable std::atomic<bool> settle_on_host{false};
  // CPU's kernel warned on the stand-ins (std of one element: "degrees of freedom is <= 0"): every
  // call runs on the host, so that the warning comes at the call, not at the next synchronize
  // from a stream worker. Such warnings depend on sizes and flags, which the plan is keyed by.
  bool warns_on_host = false;
  // The thread policy's hint of the kernel's size (TaskTag::elements,
  // backend/common/thread_policy.h): the most elements of one tensor it reads or writes, or for a
  // matrix product or a convolution its multiply-adds divided by kMultiplyAddsPerElement,
  // whichever is more (executor/size_hint.h). Computed once per signature.
  std::uint64_t size_hint = 0;
};

// The returns' metadata of `op` applied to stack[first, first + nargs), by its meta kernel (CPU
// tensor arguments as they are); nullopt when the meta kernel fails or returns a non-tensor.
std::optional<std::vector<MetaReturn>> meta_returns(const c10::OperatorHandle& op,
                                                    const torch::jit::Stack& stack,
                                                    std::size_t first, std::size_t nargs);

// Marks plan.undefined_returns undefined in `returns` (the plan's or one call's); whether any was.
bool mark_undefined_returns(const LaunchPlan& plan, std::vector<MetaReturn>& returns);

// The plan for `op` applied to stack[first, first + nargs).
std::shared_ptr<const LaunchPlan> make_launch_plan(const c10::OperatorHandle& op,
                                                   const torch::jit::Stack& stack,
                                                   std::size_t first, std::size_t nargs);

}  // namespace vdev::backend
