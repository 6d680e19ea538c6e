// The Work and Future of a vccl collective (backend/distributed/comm_backend.h), with NCCL's
// stream semantics.
//
// A collective runs as one task on the process group's communication stream. `done` is an event
// recorded on that stream right after the task, and `outcome` is what the task itself reports
// (finished, and the exception it raised). Then, as for NCCL:
//   - wait() and synchronize() make the calling thread's current stream of the device wait for
//     `done`; the host does not block (except for barrier, whose wait blocks the host as NCCL's
//     does). An exception the collective already raised is rethrown by wait().
//   - is_completed() / is_success() / exception() read `outcome` without blocking.
//   - getFuture() is completed at once with the output tensors and the comm stream's position
//     (c10's Future records an event on the then-current stream of the device): its wait() and
//     then() callbacks are stream-ordered after the collective, which is what DDP's comm hooks use.
// A failed collective's error also stays with the comm stream (runtime/stream.h): `done` carries
// it to every stream that waits on it, so the waiting thread's next synchronize raises it.
//
// Thread rules: every member is safe from any thread; `outcome` is written once by the comm
// stream's worker. Ownership: the Work shares `done` and `outcome` with the queued task and keeps
// the output tensors alive (Work::result()); device memory in flight is protected by
// record_stream, not by the Work.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/event.h"

namespace vdev::backend {

// What the comm task reports about itself.
struct CommOutcome {
  std::atomic<bool> finished{false};
  mutable std::mutex mu;
  std::exception_ptr error;  // guarded by mu

  void finish(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      error = std::move(e);
    }
    finished.store(true);
  }
  std::exception_ptr failure() const {
    std::lock_guard<std::mutex> lock(mu);
    return error;
  }
};

class CommWork : public c10d::Work {
 public:
  CommWork(int rank, c10d::OpType type, c10::DeviceIndex device,
           std::shared_ptr<vdev::rt::Event> done, std::shared_ptr<CommOutcome> outcome,
           std::vector<at::Tensor> outputs, c10::intrusive_ptr<c10::ivalue::Future> future,
           bool host_waits);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void blockCurrentStream() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  const c10::DeviceIndex device_;
  const std::shared_ptr<vdev::rt::Event> done_;
  const std::shared_ptr<CommOutcome> outcome_;
  const std::vector<at::Tensor> outputs_;
  const c10::intrusive_ptr<c10::ivalue::Future> future_;
  const bool host_waits_;
};

}  // namespace vdev::backend
