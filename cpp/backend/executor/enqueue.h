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
// try_enqueue_operator() returns queued == false, having changed nothing, when the plan says the
// call cannot run this way (backend/executor/eligibility.h), or when CPU's argument checks failed
// on stand-ins (backend/executor/stand_in_check.h: then `to_settle` is the plan); the caller then
// runs it synchronously (backend/ops/fallback.cpp) and, if that succeeds, calls
// to_settle->settle_on_host.store(false).
//
// Thread rules: called on the dispatching thread; the task runs on a stream worker.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

#include <memory>

namespace vdev::backend {

struct LaunchPlan;

struct EnqueueOutcome {
  bool queued = false;
  std::shared_ptr<const LaunchPlan> to_settle;  // run synchronously to settle a failed check
};

EnqueueOutcome try_enqueue_operator(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                                    c10::Device device);

}  // namespace vdev::backend
