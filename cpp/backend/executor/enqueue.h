// The asynchronous operator executor's entry point: runs any aten operator on vdev tensors as a
// task on the current stream of their device.
//
// On the calling thread: the call's launch plan is looked up by signature or made
// (backend/executor/launch_plan.h, plan_cache.h); fresh outputs are allocated on the device with
// the sizes, strides and dtypes the plan's meta kernel gave (an out= argument of the wrong size is
// resized); the call is captured as an OperatorTask (backend/executor/operator_task.h) and queued
// (backend/common/task.h: below autograd, with the host's intra-op thread count, never
// depending on the worker's thread-local state). The outputs replace the arguments on the stack.
//
// try_enqueue_operator() declines, having changed nothing, when the plan says the call cannot run
// this way (backend/executor/eligibility.h), or when CPU's argument checks failed on stand-ins
// (backend/checks/stand_in_check.h: then the outcome must be settled). The caller then runs the
// call synchronously (backend/ops/fallback.cpp); a call to settle goes to settle_on_the_host(),
// which runs it on the host on its real arguments: that raises CPU's error at the call, or
// succeeds, and then the stand-ins were at fault and calls of that plan are queued again. The
// plan's settle flag is the executor's own: only this file reads and writes it.
//
// Thread rules: called on the dispatching thread; the task runs on a stream worker.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

#include <memory>
#include <utility>

#include "backend/executor/return_metadata.h"

namespace vdev::backend {

struct LaunchPlan;

// What try_enqueue_operator did with a call.
class EnqueueOutcome {
 public:
  static EnqueueOutcome queued_call() { return EnqueueOutcome(true, nullptr); }
  static EnqueueOutcome declined() { return EnqueueOutcome(false, nullptr); }
  static EnqueueOutcome to_settle(std::shared_ptr<const LaunchPlan> plan) {
    return EnqueueOutcome(false, std::move(plan));
  }

  bool queued() const { return queued_; }
  // CPU's checks failed on stand-ins of this call's arguments: settle_on_the_host() runs it.
  bool must_settle() const { return to_settle_ != nullptr; }

 private:
  friend void settle_on_the_host(const c10::OperatorHandle&, torch::jit::Stack*, c10::Device,
                                 const EnqueueOutcome&);
  EnqueueOutcome(bool queued, std::shared_ptr<const LaunchPlan> plan)
      : queued_(queued), to_settle_(std::move(plan)) {}
  bool queued_;
  std::shared_ptr<const LaunchPlan> to_settle_;
};

// A fresh output of the metadata `m` (undefined if `m` is), on the device the caller's DeviceGuard
// names (the express lane's too, executor/express.h).
at::Tensor fresh_output(const MetaTensor& m);

EnqueueOutcome try_enqueue_operator(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                                    c10::Device device);

// Runs a call whose outcome must_settle() synchronously on its real arguments, on CPU aliases
// (backend/executor/host_run.h), so CPU's kernel raises its error at the call; when it succeeds,
// calls of that plan are queued again. The caller has reported the synchronization.
void settle_on_the_host(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::Device device,
                        const EnqueueOutcome& outcome);

}  // namespace vdev::backend
