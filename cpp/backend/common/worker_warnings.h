// Warnings raised by queued kernels reach Python's warnings machinery on the host.
//
// A kernel running on a stream worker warns through c10 (TORCH_WARN: std of one element, a
// complex-to-real cast, a deprecated overload). On the worker there is no Python handler, so c10
// would print it to stderr, where `-W error` and warnings.catch_warnings never see it. Instead,
// every task runs with a CaptureWorkerWarnings (common/task.h): the warnings it raises are kept,
// with the task's name and stream, and the host re-raises them at its next synchronization point
// (a synchronize, a blocking copy, .item(), an operator run on the host), once each, through
// c10::warn, which PyTorch's bindings turn into Python warnings (same category, message and
// "Triggered internally at" location as on CPU, plus where the kernel was queued).
// Nondeterminism alerts are dropped on the worker: vdev raised CUDA's at the call
// (checks/nondeterministic_alerts.h) and CPU's kernels would repeat them.
//
// Thread rules: CaptureWorkerWarnings lives on a worker for one task (thread-local handler, RAII).
// The pending list is process-wide, under one mutex; any host thread may take or re-raise it.
#pragma once

#include <c10/util/Exception.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/common/export.h"

namespace vdev::backend {

class VDEV_BACKEND_API CaptureWorkerWarnings final : private c10::WarningHandler {
 public:
  CaptureWorkerWarnings(const char* task_name, int device, std::int64_t stream_id);
  ~CaptureWorkerWarnings() override;
  CaptureWorkerWarnings(const CaptureWorkerWarnings&) = delete;
  CaptureWorkerWarnings& operator=(const CaptureWorkerWarnings&) = delete;

 private:
  void process(const c10::Warning& warning) override;
  c10::WarningHandler* previous_;
  const char* task_name_;
  int device_;
  std::int64_t stream_id_;
};

// The warnings queued kernels raised since the last call, oldest first (each returned once).
VDEV_BACKEND_API std::vector<c10::Warning> take_worker_warnings();

// Re-raises them on the calling (host) thread through c10::warn.
VDEV_BACKEND_API void reraise_worker_warnings();

// Runs `wait` (a host wait for queued work), then re-raises what the finished kernels warned,
// also when the wait raises a kernel's error.
template <typename Wait>
void wait_then_reraise_warnings(Wait&& wait) {
  try {
    wait();
  } catch (...) {
    reraise_worker_warnings();
    throw;
  }
  reraise_worker_warnings();
}

}  // namespace vdev::backend
