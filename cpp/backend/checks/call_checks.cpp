#include "backend/checks/call_checks.h"

#include "backend/checks/capability_rules.h"
#include "backend/checks/device_rules.h"
#include "backend/checks/empty_inputs.h"
#include "backend/checks/index_masks.h"
#include "backend/checks/missing_cuda_kernels.h"
#include "backend/checks/nondeterministic_alerts.h"
#include "backend/checks/overlap.h"
#include "backend/common/optional_tensor_lists.h"

namespace vdev::backend {

CheckedCall check_call(const c10::OperatorHandle& op, torch::jit::Stack& stack) {
  refuse_operator_the_profile_lacks(op);          // VDEV_PROFILE's device has no kernel for it
  canonicalize_optional_tensor_lists(op, stack);  // TorchScript's x[m]
  CheckedCall call;
  call.device = check_operator_devices(op, stack);
  if (call.device) refuse_what_cuda_cannot_run(op, stack);
  expand_index_masks(op, stack);  // x[mask]: the mask's indices, as CUDA makes them
  check_like_cpu_when_inputs_are_empty(op, stack);
  alert_where_cuda_is_nondeterministic(op, stack);
  call.overlapping =
      call.device && call.device->has_index() && written_arguments_overlap(op, stack);
  return call;
}

}  // namespace vdev::backend
