// Silencing CPU's repetitions of CUDA's nondeterminism alerts.
//
// vdev raises CUDA's alerts itself, on the host at the call (checks/nondeterministic_alerts.h).
// Other places would repeat them as warnings with warn_only=True: a few CPU kernels alert too
// (put_, max_unpool2d/3d), on the host's synchronous path or on a stream worker (which drops them:
// common/worker_warnings.h), and meta functions written for CUDA alert while the executor plans.
// While a SilenceNondeterminismAlerts lives on a thread, c10 warnings that are nondeterminism
// alerts are dropped there; every other warning goes to the handler that was current before.
//
// Thread rules: thread-local; construct and destroy on the same thread, nested freely.
#pragma once

#include <c10/util/Exception.h>

#include "backend/common/export.h"

namespace vdev::backend {

// Whether `warning` is at::Context::alertNotDeterministic's (warn_only=True).
VDEV_BACKEND_API bool is_nondeterminism_alert(const c10::Warning& warning);

class VDEV_BACKEND_API SilenceNondeterminismAlerts final : private c10::WarningHandler {
 public:
  SilenceNondeterminismAlerts();
  ~SilenceNondeterminismAlerts() override;
  SilenceNondeterminismAlerts(const SilenceNondeterminismAlerts&) = delete;
  SilenceNondeterminismAlerts& operator=(const SilenceNondeterminismAlerts&) = delete;

 private:
  void process(const c10::Warning& warning) override;
  c10::WarningHandler* previous_;
};

}  // namespace vdev::backend
