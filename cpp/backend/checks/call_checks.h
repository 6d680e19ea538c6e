// The checks made at every call of the boxed kernel (ops/fallback.cpp), before anything is queued:
// what CUDA decides on the host before it launches a kernel, so that a wrong call raises at the
// call, with CUDA's error, and nothing is queued or changed.
//
// In order: what the device's capability profile lacks (checks/capability_rules.h); `Tensor?[]`
// lists made canonical (common/optional_tensor_lists.h); the devices of the
// arguments (checks/device_rules.h), which also gives the device the call runs on; what CUDA has
// no kernel for (checks/missing_cuda_kernels.h); boolean index masks made into their indices
// (checks/index_masks.h); CPU's errors for all-empty inputs (checks/empty_inputs.h); CUDA's
// nondeterminism alerts (checks/nondeterministic_alerts.h); whether a written argument overlaps
// another (checks/overlap.h). CPU's own argument checks on stand-ins come later, once per launch
// plan (checks/stand_in_check.h, from the executor).
//
// Thread rules: stateless; runs on the dispatching thread.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

#include <optional>

namespace vdev::backend {

// What the checks found out about a call that passed them.
struct CheckedCall {
  // The vdev device the call runs on (checks/device_rules.h); nullopt: no vdev argument (a CPU
  // call that reached vdev through a vdev generator's dispatch key).
  std::optional<c10::Device> device;
  // A written argument overlaps another argument: the call must run on the host
  // (executor/host_run.h).
  bool overlapping = false;

  // Whether the executor may queue the call.
  bool may_queue() const { return device && device->has_index() && !overlapping; }
};

// Runs every check on the call of `op` on top of `stack` (it may rewrite arguments: canonical
// lists, masks as indices); raises the error CUDA raises for a wrong call.
CheckedCall check_call(const c10::OperatorHandle& op, torch::jit::Stack& stack);

}  // namespace vdev::backend
