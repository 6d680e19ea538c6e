#include "backend/distributed/comm_work.h"

#include "backend/common/error_boundary.h"
#include "backend/common/stream_lookup.h"

namespace vdev::backend {

CommWork::CommWork(int rank, c10d::OpType type, c10::DeviceIndex device,
                   std::shared_ptr<vdev::rt::Event> done, std::shared_ptr<CommOutcome> outcome,
                   std::vector<at::Tensor> outputs, c10::intrusive_ptr<c10::ivalue::Future> future,
                   bool host_waits)
    : c10d::Work(rank, type),
      device_(device),
      done_(std::move(done)),
      outcome_(std::move(outcome)),
      outputs_(std::move(outputs)),
      future_(std::move(future)),
      host_waits_(host_waits) {}

bool CommWork::isCompleted() { return outcome_->finished.load(); }

bool CommWork::isSuccess() const {
  return outcome_->finished.load() && outcome_->failure() == nullptr;
}

std::exception_ptr CommWork::exception() const { return outcome_->failure(); }

std::vector<at::Tensor> CommWork::result() { return outputs_; }

void CommWork::synchronize() {
  // The current stream waits for the collective; the host goes on (NCCL's WorkNCCL::synchronize).
  call_runtime([&] { done_->block(current_runtime_stream(device_)); });
}

bool CommWork::wait(std::chrono::milliseconds /*timeout: the collective's own applies*/) {
  if (auto failure = outcome_->failure()) std::rethrow_exception(failure);
  if (host_waits_) {
    // barrier: NCCL's barrier work blocks the host until the device has passed it.
    call_runtime([&] { done_->synchronize(); });
    if (auto failure = outcome_->failure()) std::rethrow_exception(failure);
  } else {
    synchronize();
  }
  return true;
}

void CommWork::blockCurrentStream() { synchronize(); }

c10::intrusive_ptr<c10::ivalue::Future> CommWork::getFuture() { return future_; }

}  // namespace vdev::backend
