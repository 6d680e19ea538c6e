// The task that runs one queued operator call on a stream worker.
//
// Captured on the host (the constructor): vdev tensor arguments become AliasSpecs, made into CPU
// aliases of the device bytes on the worker (backend/common/cpu_alias.h), so that their allocations
// stay on the thread that frees them; CPU tensor arguments are snapshotted (the caller may change
// them once the call returns); fresh outputs, already allocated on the device, are captured the
// same way. The task holds no device memory: the caching allocator orders the reuse of freed blocks
// by streams (backend/memory/device_cache.h), as CUDA's does.
//
// Run on the worker (operator()): the CPU kernel computes on the aliases (a random operator with
// an engine keyed by the draw reserved when it was queued). Fresh outputs are
// written by the out= overload when the plan has one (backend/executor/out_variants.h), else by
// the functional kernel followed by a copy; in-place and out= operators write through their
// argument aliases. An out= kernel that refuses its outputs is remembered, and the functional
// form plus a copy is used instead, now and from then on.
//
// Thread rules: constructed on the dispatching thread; operator() on one stream worker.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "backend/common/cpu_alias.h"
#include "backend/executor/launch_plan.h"
#include "backend/random/generator.h"

namespace vdev::backend {

class OperatorTask {
 public:
  // Captures the call of `op` on stack[first, end) with `outputs` (the device tensors the call
  // returns) under `plan`; a random operator (plan->generator_arg) with the draw reserved for it.
  // Built where it is queued (emplace_launch in backend/common/task.h), never moved.
  OperatorTask(const c10::OperatorHandle& op, std::shared_ptr<const LaunchPlan> plan,
               const torch::jit::Stack& stack, std::size_t first,
               const std::vector<c10::IValue>& outputs, std::optional<RandomDraw> draw);

  // Runs the call. Errors leave as std::runtime_error with the message only (the stream adds the
  // operator's name).
  void operator()();

 private:
  void run();
  torch::jit::Stack make_args() const;

  c10::OperatorHandle op_;                  // as called: functional, in-place or out=
  std::shared_ptr<const LaunchPlan> plan_;  // out_op, out_args, out_refused
  bool use_out_op_ = false;                 // all outputs fresh and plan_->out_op usable
  // The arguments: snapshots of CPU tensors and other values; vdev tensors are made into CPU
  // aliases on the worker from arg_specs_ (position, spec), or, inside tensor lists, on the host.
  // Inline for up to 4 (a small operator's): a task's own allocations are freed on the stream
  // worker, and every block allocated on one thread and freed on another costs glibc's arena lock
  // on both threads.
  c10::SmallVector<c10::IValue, 4> args_;
  c10::SmallVector<std::pair<std::size_t, AliasSpec>, 3> arg_specs_;
  // A random operator's draw: its Generator argument becomes a CPU engine keyed by it, on the
  // worker (backend/random/keyed_engine.h).
  std::optional<RandomDraw> draw_;
  // Fresh outputs: single tensors as specs (aliases made on the worker), other returns (tensor
  // lists, None) as host-made IValues in host_outputs_ at the same positions.
  bool fresh_outputs_ = false;
  c10::SmallVector<std::optional<AliasSpec>, 2> output_specs_;
  std::vector<c10::IValue> host_outputs_;
};

// The worker's part of a queued call, shared with the express lane's task (executor/
// express_task.h): runs `op` under `plan` on `made` (its arguments, vdev tensors as CPU aliases).
// run_fresh writes the call's returns into `outputs` (CPU aliases of its fresh device outputs, or
// host-made values), with the plan's out= overload when `use_out_op`; run_mutating runs an
// in-place or out= call, which writes through its argument aliases.
void run_fresh(const c10::OperatorHandle& op, const LaunchPlan& plan, const torch::jit::Stack& made,
               const std::vector<c10::IValue>& outputs, bool use_out_op);
void run_mutating(const c10::OperatorHandle& op, const LaunchPlan& plan,
                  const torch::jit::Stack& made);

}  // namespace vdev::backend
