// vccl: the c10d backend for vdev tensors. It runs Gloo's collectives (a ProcessGroupGloo made by
// torch.distributed, driven through the virtual c10d::Backend interface: the torch wheel ships no
// Gloo headers) on the device bytes, on a communication stream of the device, as NCCL runs on its
// own CUDA stream.
//
// A collective called on the host:
//   1. checks its arguments and raises at the call, with NCCL's exception type and message (or
//      Gloo's where vccl is stricter than NCCL): tensors (vdev, on the group's device, dense,
//      contiguous, one of NCCL's dtypes), root and peer ranks, list lengths, sizes and dtypes,
//      and the reduce op against the dtype. Whatever depends only on the arguments is checked
//      here, before anything is queued, so a bad call leaves the group working (Gloo's own
//      checks would run inside the queued task and break the group);
//   2. makes the comm stream wait for the work queued so far on the caller's current stream;
//   3. declares every tensor used on the comm stream (record_stream: the caching allocator does
//      not reuse the memory before the collective has finished, even if the caller frees it);
//   4. queues one task on the comm stream that hands Gloo CPU aliases of the device bytes
//      (kernel-side addresses: no staging copy) and waits for Gloo's work;
//   5. returns a CommWork (backend/distributed/comm_work.h) without blocking the host.
// Between startCoalescing() and endCoalescing() the collectives are gathered and run as one task
// that starts them all before waiting for any (batch_isend_irecv's pairs of sends and receives
// would otherwise wait for each other).
// A single send or recv is posted by its comm stream task, which does not wait for it: a second
// stream of the group (the p2p stream) waits for it, and the Work's event is recorded there.
// Gloo's sends complete only once the peer has posted the matching receive, so waiting on the
// comm stream would deadlock the common `isend(next); irecv(prev)` on every rank, which NCCL runs
// (NCCL's small sends complete into the peer's buffers). Later collectives are not ordered after
// a pending send or recv, as NCCL's collective and p2p streams are not: Work.wait() orders them.
//
// Before a collective's data moves, the ranks compare what they called (op, dtype, number of
// tensors and elements of the tensors that must agree, reduce op, root rank) with a small Gloo
// all-gather on the same
// task: a mismatch raises on every rank, naming both sides. Without it, Gloo's transport aborts
// the process that receives more bytes than it expects (gloo::EnforceNotMet in its I/O thread).
// Sends and receives are not compared (their sizes may differ by design: the receiver's buffer).
//
// The group's device is the device of its first collective's tensors (NCCL binds a group to one
// device per rank); tensors on another vdev device then raise ValueError. At the first collective
// (not a send or recv: those involve two ranks) the ranks also compare their hosts and devices on
// the host, as NCCL's communicator init does: two ranks of one host on one device raise NCCL's
// "Duplicate GPU detected" as DistBackendError on every rank, at the call (the check runs again
// at the next collective, as NCCL's init would). All collectives of a
// group run on its one comm stream, in the order the host called them, which is the order Gloo
// requires on every rank.
//
// Errors in flight (a peer that dies, a timeout, mismatched calls) fail the task within Gloo's
// timeout: the Work reports it, and the streams that waited for the collective carry it to their
// next synchronize, as DistBackendError wherever it surfaces (NCCL's watchdog's type; the
// runtime keeps the kind through events: rt::CommFailure). The group is then broken for good, as an
// NCCL communicator is after an error: every later collective of the group raises DistBackendError
// at the call, naming the first failure. (Without this, the comm stream's kept error would be
// thrown at the next collective's queueing on one rank but not on another that had synchronized it
// away: the ranks would fall out of step and the healthy one wait for the whole timeout.) Nothing
// else on the device is touched; a new group works.
//
// An injected fault (VDEV_DIST_FAULT, backend/distributed/dist_fault.h) is taken as a collective
// is queued; the task runs the fault instead of the collective.
//
// Thread rules: collectives may be called from any host thread (the binding and the coalescing
// state are guarded by a mutex); c10d's own rule stands: every rank calls them in the same order.
// Ownership: the backend owns the Gloo backend and shares it with queued tasks (an intrusive_ptr
// per task), so destroying the process group while collectives are queued is safe.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/common/cpu_alias.h"
#include "backend/common/export.h"
#include "backend/common/launch.h"
#include "backend/distributed/comm_work.h"
#include "backend/distributed/rank_agreement.h"
#include "runtime/stream.h"

namespace vdev::backend {

class VDEV_BACKEND_API CommBackend : public c10d::Backend {
 public:
  // `gloo`: a ProcessGroupGloo of the same rank and size, on its own store prefix.
  CommBackend(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size);

  const std::string getBackendName() const override { return "vccl"; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setTimeout(std::chrono::milliseconds timeout) override { gloo_->setTimeout(timeout); }
  void setSequenceNumberForGroup() override { gloo_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return gloo_->getSequenceNumberForGroup(); }
  void setGroupUid(const std::string& uid) override;
  void shutdown() override;
  void abort() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Argument lists as Gloo's methods take them; args[0] is the flat list (inputs or in-place
  // tensors), later entries the nested lists (one per rank or per input).
  using TensorLists = std::vector<std::vector<at::Tensor>>;
  using GlooCall = std::function<c10::intrusive_ptr<c10d::Work>(c10d::Backend&, TensorLists&)>;
  // Runs on the comm stream's task once Gloo's work is done, on the same aliases (integer AVG's
  // division).
  using Finish = std::function<void(TensorLists&)>;
  // What every rank must agree on for a collective (op, dtype, tensors, elements, reduce op,
  // root); rank_agreement.h names the fields.
  struct Pending {
    std::vector<std::vector<AliasSpec>> args;
    GlooCall call;
    std::optional<Fingerprint> print;  // none: not compared (send, recv)
    Finish finish;                     // may be empty
    HeldUses uses;  // for the launch observers, while one observes (cleared before queuing)
  };
  struct Submission {
    c10d::OpType type;
    const char* name;
    TensorLists args;
    std::vector<at::Tensor> outputs;   // what the Work's result() and Future hold
    std::vector<at::Tensor> agreeing;  // the tensors whose dtype and size every rank shares
    bool host_waits = false;
    int64_t reduce_op = -1;  // the ReduceOp every rank passes (-1: not a reduction)
    int64_t root = -1;       // the root rank every rank names (-1: not rooted)
    Finish finish;           // may be empty
  };

  c10::intrusive_ptr<c10d::Work> submit(Submission s, GlooCall call);
  // The group's device for tensors on `device` (binds it on first use).
  vdev::rt::Stream& comm_stream_for(c10::DeviceIndex device, const char* name);
  // NCCL's duplicate-device check (its communicator's init): at the group's first collective the
  // ranks all-gather their host and device on the host, and two ranks of one host on one vdev
  // device raise DistBackendError on every rank (mu_ held).
  void check_devices_distinct_locked(c10::DeviceIndex device, const char* name);
  // Checks every tensor; the device they are on (mu_ held: reads the group's binding).
  c10::DeviceIndex device_of_locked(const TensorLists& args, const char* name) const;
  c10::intrusive_ptr<c10d::Work> queue_locked(std::vector<Pending> ops, c10d::OpType type,
                                              const char* name, std::vector<at::Tensor> outputs,
                                              bool host_waits);

  // Set by the first failing task of the group (on a worker), read before queueing.
  struct Failure {
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::string first;  // guarded by mu
  };
  void check_not_failed(const char* name) const;
  // A task's failure: its Work reports it, and the group is broken from now on. Throws it as
  // DistBackendError naming the collective (as NCCL's watchdog ends a failed or timed-out
  // collective), whatever Gloo threw, so that Work.wait(), the streams that waited for it and
  // a synchronize all raise torch.distributed.DistBackendError.
  [[noreturn]] static void fail(CommOutcome& outcome, Failure& failure, const std::exception_ptr& e,
                                const char* name);
  [[noreturn]] static void throw_failed(Failure& failure, const char* name);

  const c10::intrusive_ptr<c10d::Backend> gloo_;
  const std::shared_ptr<Failure> failure_ = std::make_shared<Failure>();
  // Set by shutdown() and abort(): ends an injected hang (VDEV_DIST_FAULT) before its timeout.
  const std::shared_ptr<std::atomic<bool>> closed_ = std::make_shared<std::atomic<bool>>(false);
  std::mutex mu_;
  // The Work of what was just queued on `stream`: an event and a completed Future there.
  c10::intrusive_ptr<c10d::Work> work_after_locked(vdev::rt::Stream& stream, c10d::OpType type,
                                                   std::shared_ptr<CommOutcome> outcome,
                                                   std::vector<at::Tensor> outputs,
                                                   bool host_waits);
  c10::intrusive_ptr<c10d::Work> queue_p2p_locked(Pending op, c10d::OpType type, const char* name,
                                                  std::vector<at::Tensor> outputs);

  vdev::rt::Stream* comm_ = nullptr;           // guarded by mu_; set on first use, then fixed
  vdev::rt::Stream* p2p_ = nullptr;            // guarded by mu_; set with comm_
  c10::DeviceIndex device_ = -1;               // guarded by mu_
  bool devices_distinct_ = false;              // guarded by mu_; set once checked
  bool coalescing_ = false;                    // guarded by mu_
  std::vector<Pending> coalesced_;             // guarded by mu_
  std::vector<at::Tensor> coalesced_outputs_;  // guarded by mu_
};

}  // namespace vdev::backend
