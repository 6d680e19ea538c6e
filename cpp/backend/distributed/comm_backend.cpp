#include "backend/distributed/comm_backend.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/ScalarType.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/distributed/c10d/Utils.hpp>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "backend/common/error_boundary.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/common/vdev_device.h"
#include "backend/distributed/comm_checks.h"
#include "backend/distributed/comm_work.h"
#include "backend/distributed/dist_fault.h"
#include "backend/distributed/rank_agreement.h"
#include "backend/memory/allocator.h"
#include "runtime/event.h"

namespace vdev::backend {
namespace {

// The bytes a collective moves, for the task observers (the profiler): its first tensor list.
std::uint64_t collective_bytes(const std::vector<std::vector<AliasSpec>>& args) {
  std::uint64_t bytes = 0;
  if (!args.empty()) {
    for (const AliasSpec& a : args.front()) {
      std::uint64_t n = c10::elementSize(a.dtype);
      for (int64_t d : a.sizes) n *= static_cast<std::uint64_t>(d);
      bytes += n;
    }
  }
  return bytes;
}

// What a collective reads and writes, for the launch observers: its outputs (what its Work holds)
// are written (reductions in place read them first), every other tensor is read.
HeldUses collective_uses(c10d::OpType type, const std::vector<std::vector<at::Tensor>>& args,
                         const std::vector<at::Tensor>& outputs) {
  const bool in_place_reduction = type == c10d::OpType::ALLREDUCE || type == c10d::OpType::REDUCE ||
                                  type == c10d::OpType::ALLREDUCE_COALESCED;
  HeldUses uses;
  for (const auto& list : args) {
    for (const at::Tensor& t : list) {
      const bool output = std::any_of(outputs.begin(), outputs.end(), [&](const at::Tensor& o) {
        return o.unsafeGetTensorImpl() == t.unsafeGetTensorImpl();
      });
      uses.add(
          t, !output ? Access::kRead : (in_place_reduction ? Access::kReadWrite : Access::kWrite));
    }
  }
  return uses;
}

std::vector<std::vector<AliasSpec>> alias_specs(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<AliasSpec>> specs(lists.size());
  for (std::size_t i = 0; i < lists.size(); ++i) {
    specs[i].reserve(lists[i].size());
    for (const at::Tensor& t : lists[i]) {
      // Gloo has neither complex nor float8 types: complex tensors go as pairs of reals (as in
      // torch's and NCCL's collectives), float8 ones as bytes (only moved: never reduced).
      AliasSpec spec = AliasSpec::of(t.is_complex() && !t.is_conj() ? at::view_as_real(t) : t);
      if (c10::isFloat8Type(spec.dtype)) spec.dtype = at::kByte;
      specs[i].push_back(std::move(spec));
    }
  }
  return specs;
}

std::vector<std::vector<at::Tensor>> make_aliases(
    const std::vector<std::vector<AliasSpec>>& specs) {
  std::vector<std::vector<at::Tensor>> lists(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    lists[i].reserve(specs[i].size());
    for (const AliasSpec& s : specs[i]) lists[i].push_back(s.make());
  }
  return lists;
}

// This host, as NCCL tells hosts apart (its getHostHash): the host name and the kernel's boot id.
int64_t host_id() {
  static const int64_t id = [] {
    std::string key(256, '\0');
    if (gethostname(key.data(), key.size()) != 0) key = "unknown-host";
    key.resize(key.find('\0') == std::string::npos ? key.size() : key.find('\0'));
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string boot_id;
    std::getline(boot, boot_id);
    return static_cast<int64_t>(std::hash<std::string>{}(key + "/" + boot_id));
  }();
  return id;
}

c10::intrusive_ptr<c10::ivalue::Future> new_future(c10::DeviceIndex device) {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                  std::vector<c10::Device>{{kVdev, device}});
}

// Completes `future` at the comm stream's current position: c10's Future records an event on the
// current stream of each device its value uses, so waiting on it orders after the collective.
void complete_on(vdev::rt::Stream& comm, c10::ivalue::Future& future,
                 std::vector<at::Tensor> outputs) {
  const c10::StreamGuard on_comm(to_c10(comm));
  future.markCompleted(c10::IValue(std::move(outputs)));
}

}  // namespace

CommBackend::CommBackend(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size)
    : c10d::Backend(rank, size), gloo_(std::move(gloo)) {
  TORCH_CHECK(gloo_, "vccl: no Gloo backend given");
  TORCH_CHECK(gloo_->getRank() == rank && gloo_->getSize() == size,
              "vccl: the Gloo backend is rank ", gloo_->getRank(), " of ", gloo_->getSize(),
              ", expected rank ", rank, " of ", size);
}

void CommBackend::setGroupUid(const std::string& uid) {
  c10d::Backend::setGroupUid(uid);
  gloo_->setGroupUid(uid);
}

void CommBackend::shutdown() {
  // Queued collectives keep their own reference to Gloo; shutting it down fails them (with
  // Gloo's error), which is what NCCL's shutdown does to work in flight.
  closed_->store(true);
  gloo_->shutdown();
}

void CommBackend::abort() {
  closed_->store(true);
  gloo_->abort();
}

void CommBackend::fail(CommOutcome& outcome, Failure& failure, const std::exception_ptr& e,
                       const char* name) {
  std::string what = "unknown error";
  bool ours = false;  // already a DistBackendError naming the collective (vccl's own)
  try {
    std::rethrow_exception(e);
  } catch (const c10::DistBackendError& err) {
    what = err.what_without_backtrace();
    ours = true;
  } catch (const c10::Error& err) {
    what = err.what_without_backtrace();
  } catch (const std::exception& err) {
    what = err.what();
  } catch (...) {
  }
  {
    std::lock_guard<std::mutex> lock(failure.mu);
    if (!failure.failed.load()) {
      failure.first = what;
      failure.failed.store(true);
    }
  }
  // NCCL's WorkNCCL raises every failed or timed-out collective as DistBackendError
  // (C10_THROW_ERROR(DistBackendError, ...) in ProcessGroupNCCL.cpp); Gloo raises plain errors.
  std::exception_ptr raised = e;
  if (!ours) {
    try {
      const std::string prefix = c10::str("vccl ", name, ": ");
      C10_THROW_ERROR(DistBackendError, what.rfind(prefix, 0) == 0 ? what : prefix + what);
    } catch (...) {
      raised = std::current_exception();
    }
  }
  // Last: whoever sees the Work fail also finds the group broken.
  outcome.finish(raised);
  std::rethrow_exception(raised);
}

void CommBackend::throw_failed(Failure& failure, const char* name) {
  std::lock_guard<std::mutex> lock(failure.mu);
  C10_THROW_ERROR(DistBackendError,
                  c10::str("vccl ", name, ": this process group failed earlier and runs no more ",
                           "collectives (as an NCCL communicator after an error); create a new ",
                           "group. The first failure: ", failure.first));
}

void CommBackend::check_not_failed(const char* name) const {
  if (failure_->failed.load()) throw_failed(*failure_, name);
}

c10::DeviceIndex CommBackend::device_of_locked(const TensorLists& args, const char* name) const {
  for (const auto& list : args) {
    for (const at::Tensor& t : list) {
      check_tensor(t, name);
    }
  }
  for (const auto& list : args) {
    if (!list.empty()) return list.front().device().index();
  }
  // No tensor (barrier): the group's device, or the calling thread's current one.
  if (comm_) return device_;
  return c10::impl::getDeviceGuardImpl(kVdev)->getDevice().index();
}

void CommBackend::check_devices_distinct_locked(c10::DeviceIndex device, const char* name) {
  if (devices_distinct_) return;
  if (size_ > 1) {
    at::Tensor mine = at::empty({2}, at::kLong);
    mine.data_ptr<int64_t>()[0] = host_id();
    mine.data_ptr<int64_t>()[1] = device;
    at::Tensor all = at::empty({2 * static_cast<int64_t>(size_)}, at::kLong);
    // Blocks the host until every rank is here, as NCCL's blocking communicator init does.
    gloo_->_allgather_base(all, mine)->wait();
    const int64_t* p = all.const_data_ptr<int64_t>();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || p[2 * r] != p[2 * rank_] || p[2 * r + 1] != p[2 * rank_ + 1]) continue;
      // NCCL's own words (its init.cc), which torch raises as DistBackendError with
      // ncclInvalidUsage.
      C10_THROW_ERROR(
          DistBackendError,
          c10::str("vccl ", name, ": invalid usage: Duplicate GPU detected : rank ", rank_,
                   " and rank ", r, " both on vdev device ", static_cast<int>(device),
                   " (as NCCL, vccl needs one device per rank of a host: give each rank its "
                   "own, e.g. torch.vdev.set_device(local_rank) or init_process_group(device_id="
                   "torch.device(\"vdev\", local_rank)); VDEV_DEVICE_COUNT sets how many devices "
                   "there are)"));
    }
  }
  devices_distinct_ = true;
}

vdev::rt::Stream& CommBackend::comm_stream_for(c10::DeviceIndex device, const char* name) {
  if (!comm_) {
    comm_ = &call_runtime([&]() -> vdev::rt::Stream& { return vdev::rt::new_stream(device, 0); });
    p2p_ = &call_runtime([&]() -> vdev::rt::Stream& { return vdev::rt::new_stream(device, 0); });
    device_ = device;
  }
  TORCH_CHECK_VALUE(device == device_, "vccl ", name,
                    ": this process group runs on vdev:", static_cast<int>(device_),
                    " (the device of its first collective), got a tensor on vdev:",
                    static_cast<int>(device), "; use one process group per device");
  return *comm_;
}

c10::intrusive_ptr<c10d::Work> CommBackend::submit(Submission s, GlooCall call) {
  check_not_failed(s.name);
  std::lock_guard<std::mutex> lock(mu_);
  const c10::DeviceIndex device = device_of_locked(s.args, s.name);
  for (const auto& list : s.args) {
    for (const at::Tensor& t : list) {
      TORCH_CHECK_VALUE(t.device().index() == device, "vccl ", s.name,
                        ": all tensors must be on one device, got vdev:", static_cast<int>(device),
                        " and ", t.device());
    }
  }
  // Before the group binds its device: a rank that fails here has bound nothing.
  if (s.type != c10d::OpType::SEND && s.type != c10d::OpType::RECV &&
      (!comm_ || device == device_)) {
    check_devices_distinct_locked(device, s.name);
  }
  vdev::rt::Stream& comm = comm_stream_for(device, s.name);
  // The memory must not be reused before the collective ran, whatever the caller frees meanwhile.
  const bool p2p = !coalescing_ && (s.type == c10d::OpType::SEND || s.type == c10d::OpType::RECV);
  for (const auto& list : s.args) {
    for (const at::Tensor& t : list) {
      if (t.storage().data() != nullptr) {
        device_allocator()->recordStream(t.storage().data_ptr(), to_c10(comm));
        if (p2p) device_allocator()->recordStream(t.storage().data_ptr(), to_c10(*p2p_));
      }
    }
  }
  Pending op{alias_specs(s.args), std::move(call), std::nullopt, std::move(s.finish), {}};
  if (C10_UNLIKELY(launch_observers() != nullptr)) {
    op.uses = collective_uses(s.type, s.args, s.outputs);
  }
  if (s.type != c10d::OpType::SEND && s.type != c10d::OpType::RECV) {
    op.print = fingerprint(s.type, s.agreeing, s.reduce_op, s.root);
  }
  if (coalescing_) {
    coalesced_.push_back(std::move(op));
    coalesced_outputs_.insert(coalesced_outputs_.end(), s.outputs.begin(), s.outputs.end());
    // Known once endCoalescing() queues the group: c10d returns only the group's Work to users.
    auto outcome = std::make_shared<CommOutcome>();
    outcome->finish(nullptr);
    auto future = new_future(device);
    future->markCompleted(c10::IValue(std::vector<at::Tensor>{}));
    return c10::make_intrusive<CommWork>(
        rank_, s.type, device, std::make_shared<vdev::rt::Event>(false), std::move(outcome),
        std::move(s.outputs), std::move(future), false);
  }
  if (p2p) return queue_p2p_locked(std::move(op), s.type, s.name, std::move(s.outputs));
  std::vector<Pending> ops;
  ops.push_back(std::move(op));
  return queue_locked(std::move(ops), s.type, s.name, std::move(s.outputs), s.host_waits);
}

c10::intrusive_ptr<c10d::Work> CommBackend::queue_locked(std::vector<Pending> ops,
                                                         c10d::OpType type, const char* name,
                                                         std::vector<at::Tensor> outputs,
                                                         bool host_waits) {
  vdev::rt::Stream& comm = *comm_;
  auto outcome = std::make_shared<CommOutcome>();
  // Ordered after what the caller queued so far, as NCCL's stream waits on the current stream.
  order_after(comm, current_runtime_stream(device_));
  HeldUses uses;
  for (Pending& op : ops) {
    uses.append(op.uses);
    // The task must not hold the caller's tensors: released on a worker, a tensor Python still
    // knows needs the GIL, which a host thread waiting for the stream may hold.
    op.uses.clear();
  }
  auto visit_uses = [&](UseVisitor visit) { uses.visit(visit); };
  // A group is compared as a whole when every op in it is a collective (not batched send/recv).
  // (A batch sums its ops' tensors and elements.)
  std::optional<Fingerprint> print;
  if (ops.size() == 1) {
    print = ops[0].print;
  } else if (!ops.empty() &&
             std::all_of(ops.begin(), ops.end(), [](const Pending& p) { return p.print; })) {
    print = Fingerprint{static_cast<int64_t>(type), -1, 0, 0, (*ops[0].print)[kReduceOp], -1};
    for (const Pending& p : ops) {
      (*print)[kDtype] = (*p.print)[kDtype];
      (*print)[kTensors] += (*p.print)[kTensors];
      (*print)[kElements] += (*p.print)[kElements];
      // A batch whose reductions differ in op is described as mixed, and compared as such.
      if ((*p.print)[kReduceOp] != (*print)[kReduceOp]) (*print)[kReduceOp] = -2;
    }
  }
  std::uint64_t bytes = 0;
  for (const Pending& op : ops) bytes += collective_bytes(op.args);
  const bool faulted = take_dist_fault();
  queue_launch({.stream = comm,
                .name = name,
                .kind = vdev::rt::TaskKind::kCollective,
                .uses = LaunchUses::derived(visit_uses),
                .bytes = bytes},
               [ops = std::move(ops), gloo = gloo_, outcome, print, name, failure = failure_,
                faulted, closed = closed_]() {
                 try {
                   if (faulted)
                     act_on_dist_fault(gloo->getBackendOptions()->timeout, *closed, name);
                   // Queued before an earlier collective failed: the group is broken, do not start
                   // it.
                   if (failure->failed.load()) throw_failed(*failure, name);
                   if (print) check_ranks_agree(*gloo, *print, name);
                   // Start every collective of the group before waiting for any (coalesced
                   // send/recv pairs).
                   std::vector<c10::intrusive_ptr<c10d::Work>> works;
                   std::vector<TensorLists> lists;
                   works.reserve(ops.size());
                   lists.reserve(ops.size());
                   for (const Pending& op : ops) {
                     lists.push_back(make_aliases(op.args));
                     works.push_back(op.call(*gloo, lists.back()));
                   }
                   for (auto& work : works) work->wait();
                   for (std::size_t i = 0; i < ops.size(); ++i) {
                     if (ops[i].finish) ops[i].finish(lists[i]);
                   }
                   outcome->finish(nullptr);
                 } catch (...) {
                   fail(*outcome, *failure, std::current_exception(), name);
                 }
               });
  return work_after_locked(comm, type, std::move(outcome), std::move(outputs), host_waits);
}

c10::intrusive_ptr<c10d::Work> CommBackend::work_after_locked(vdev::rt::Stream& stream,
                                                              c10d::OpType type,
                                                              std::shared_ptr<CommOutcome> outcome,
                                                              std::vector<at::Tensor> outputs,
                                                              bool host_waits) {
  auto done = std::make_shared<vdev::rt::Event>(false);
  call_runtime([&] { done->record(stream); });
  auto future = new_future(device_);
  complete_on(stream, *future, outputs);
  return c10::make_intrusive<CommWork>(rank_, type, device_, std::move(done), std::move(outcome),
                                       std::move(outputs), std::move(future), host_waits);
}

c10::intrusive_ptr<c10d::Work> CommBackend::queue_p2p_locked(Pending op, c10d::OpType type,
                                                             const char* name,
                                                             std::vector<at::Tensor> outputs) {
  vdev::rt::Stream& comm = *comm_;
  vdev::rt::Stream& p2p = *p2p_;
  auto outcome = std::make_shared<CommOutcome>();
  // The posted Gloo work, handed from the comm stream's task to the p2p stream's.
  auto posted = std::make_shared<c10::intrusive_ptr<c10d::Work>>();
  // Ordered after what the caller queued so far, as NCCL's stream waits on the current stream.
  order_after(comm, current_runtime_stream(device_));
  const HeldUses uses = std::move(op.uses);  // not into the task: see queue_locked
  op.uses.clear();
  auto visit_uses = [&](UseVisitor visit) { uses.visit(visit); };
  const std::uint64_t bytes = collective_bytes(op.args);  // before `op` moves into the task
  const bool faulted = take_dist_fault();
  queue_launch({.stream = comm,
                .name = name,
                .kind = vdev::rt::TaskKind::kCollective,
                .uses = LaunchUses::derived(visit_uses),
                .bytes = bytes},
               [op = std::move(op), gloo = gloo_, outcome, posted, failure = failure_, name,
                faulted, closed = closed_]() {
                 try {
                   if (faulted)
                     act_on_dist_fault(gloo->getBackendOptions()->timeout, *closed, name);
                   if (failure->failed.load()) throw_failed(*failure, name);
                   auto lists = make_aliases(op.args);
                   *posted = op.call(*gloo, lists);  // posts the send or receive; does not wait
                 } catch (...) {
                   fail(*outcome, *failure, std::current_exception(), name);
                 }
               });
  order_after(p2p, comm);  // the p2p stream waits for the posting
  // Its tensors were the posting's: this task only waits for the transfer.
  queue_launch({.stream = p2p, .name = name}, [outcome, posted, failure = failure_, name]() {
    if (!*posted) return;  // posting failed: the comm stream and the Work report it
    try {
      (*posted)->wait();
      posted->reset();
      outcome->finish(nullptr);
    } catch (...) {
      posted->reset();
      fail(*outcome, *failure, std::current_exception(), name);
    }
  });
  return work_after_locked(p2p, type, std::move(outcome), std::move(outputs), false);
}

void CommBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(!coalescing_, "vccl: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
}

c10::intrusive_ptr<c10d::Work> CommBackend::endCoalescing() {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(coalescing_, "vccl: endCoalescing called without startCoalescing");
  check_not_failed("coalesced");
  coalescing_ = false;
  std::vector<Pending> ops = std::move(coalesced_);
  std::vector<at::Tensor> outputs = std::move(coalesced_outputs_);
  coalesced_.clear();
  coalesced_outputs_.clear();
  if (!comm_) {
    // Nothing was ever queued by this group: an empty group completes at once.
    const c10::DeviceIndex device = c10::impl::getDeviceGuardImpl(kVdev)->getDevice().index();
    comm_stream_for(device, "coalesced");
  }
  return queue_locked(std::move(ops), c10d::OpType::COALESCED, "c10d::coalesced",
                      std::move(outputs), false);
}

}  // namespace vdev::backend
