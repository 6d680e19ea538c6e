// Silencing CPU's repetitions of CUDA's nondeterminism alerts.
//
// vdev raises CUDA's alerts itself, on the host at the call (ops/nondeterministic_alerts.h). Two
// other places would repeat them as warnings with warn_only=True: a few CPU kernels alert too
// (put_, max_unpool2d/3d), on the stream worker that runs them, and meta functions written for
// CUDA alert while the executor plans a call. While a SilenceNondeterminismAlerts lives on a
// thread, c10 warnings that are nondeterminism alerts are dropped there; every other warning goes
// to the handler that was current before.
//
// Thread rules: thread-local; construct and destroy on the same thread, nested freely.
#pragma once

#include <c10/util/Exception.h>

#include "backend/common/export.h"

namespace vdev::backend {

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
