#include "backend/checks/stand_in_check.h"

#include "backend/checks/conv_stand_ins.h"
#include "backend/common/stand_in_trials.h"
#include "backend/common/sync_debug.h"

namespace vdev::backend {

bool cpu_accepts_stand_ins(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                           std::size_t first, std::size_t nargs, int64_t output_elements,
                           std::vector<bool>* undefined_returns) {
  if (!may_run_on_stand_ins(op) || is_backward_operator(op)) return true;  // not checked
  if (is_convolution(op)) {
    if (cpu_accepts_conv_stand_ins(stack, first)) return true;
  } else if (trial_may_run(op, stack, first, nargs, TrialSizes::kSmall, output_elements) &&
             run_on_stand_ins(op, stack, first, nargs, TrialSizes::kSmall, undefined_returns)) {
    return true;
  }
  // The second round settles without a host wait what small stand-ins could not, when the real
  // sizes (inputs and outputs) are small enough to compute on the host once.
  return trial_may_run(op, stack, first, nargs, TrialSizes::kReal, output_elements) &&
         run_on_stand_ins(op, stack, first, nargs, TrialSizes::kReal, undefined_returns);
}

bool may_settle_on_the_host() {
  return sync_debug_mode() == static_cast<int>(SyncDebugMode::kDisabled);
}

}  // namespace vdev::backend
