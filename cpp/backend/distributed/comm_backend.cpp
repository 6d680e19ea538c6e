#include "backend/distributed/comm_backend.h"

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "backend/common/check.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/distributed/comm_work.h"
#include "backend/memory/allocator.h"
#include "runtime/event.h"

namespace vdev::backend {
namespace {

constexpr auto kVdev = c10::DeviceType::PrivateUse1;

// NCCL's check_gpu_single_tensor, for vdev: ValueError at the call.
void check_tensor(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(t.defined(), "vccl ", name, ": undefined tensor");
  TORCH_CHECK_VALUE(t.device().type() == kVdev && t.layout() == c10::kStrided, "vccl ", name,
                    ": tensors must be vdev and dense, got a ", t.device().type(), " ", t.layout(),
                    " tensor (use the gloo backend for CPU tensors)");
  TORCH_CHECK_VALUE(t.is_contiguous(t.suggest_memory_format()), "vccl ", name,
                    ": tensors must be contiguous, got one of sizes ", t.sizes(), " and strides ",
                    t.strides());
}

// Gloo's reduce ops; PREMUL_SUM (NCCL only) is refused at the call.
void check_reduce_op(const c10d::ReduceOp& op, const char* name) {
  TORCH_CHECK_VALUE(op.op_ != c10d::ReduceOp::PREMUL_SUM && op.op_ != c10d::ReduceOp::UNUSED,
                    "vccl ", name, ": ReduceOp.",
                    op.op_ == c10d::ReduceOp::PREMUL_SUM ? "PREMUL_SUM" : "UNUSED",
                    " is not supported; vccl (built on Gloo) has SUM, AVG, PRODUCT, MIN, MAX, "
                    "BAND, BOR and BXOR");
}

void check_list_size(std::size_t got, int expected, const char* what, const char* name) {
  TORCH_CHECK_VALUE(got == static_cast<std::size_t>(expected), "vccl ", name, ": ", what,
                    " must hold world_size (", expected, ") tensors, got ", got);
}

// A call's reduce op and root go into the fingerprint: ranks that pass different ones raise.
template <typename S>
S reducing(S s, const c10d::ReduceOp& op) {
  s.reduce_op = static_cast<int64_t>(op.op_);
  return s;
}
template <typename S>
S rooted(S s, int64_t root) {
  s.root = root;
  return s;
}

std::vector<std::vector<AliasSpec>> alias_specs(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<AliasSpec>> specs(lists.size());
  for (std::size_t i = 0; i < lists.size(); ++i) {
    specs[i].reserve(lists[i].size());
    for (const at::Tensor& t : lists[i]) specs[i].push_back(AliasSpec::of(t));
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

// What every rank must agree on for a collective: op type, dtype, number of tensors and of
// elements of the tensors that must agree, reduce op and root rank (-1 where they do not apply).
constexpr std::size_t kPrintFields = 6;
using Fingerprint = std::array<int64_t, kPrintFields>;
enum PrintField : std::size_t { kType, kDtype, kTensors, kElements, kReduceOp, kRoot };

Fingerprint fingerprint(c10d::OpType type, const std::vector<at::Tensor>& agreeing,
                        int64_t reduce_op, int64_t root) {
  Fingerprint f{
      static_cast<int64_t>(type), -1, static_cast<int64_t>(agreeing.size()), 0, reduce_op, root};
  for (const at::Tensor& t : agreeing) {
    f[kDtype] = static_cast<int64_t>(t.scalar_type());
    f[kElements] += t.numel();
  }
  return f;
}

const char* reduce_op_name(int64_t op) {
  static constexpr const char* kNames[] = {"SUM",  "AVG", "PRODUCT", "MIN",        "MAX",
                                           "BAND", "BOR", "BXOR",    "PREMUL_SUM", "UNUSED"};
  return op >= 0 && op < 10 ? kNames[op] : "(mixed)";
}

std::string describe(const Fingerprint& f) {
  std::string s = c10d::opTypeToString(static_cast<c10d::OpType>(f[kType]));
  if (f[kDtype] >= 0) {
    s += c10::str(" of ", f[kTensors], " tensor(s) of ",
                  c10::toString(static_cast<c10::ScalarType>(f[kDtype])), " with ", f[kElements],
                  " element(s)");
  }
  if (f[kReduceOp] != -1) s += c10::str(" with ReduceOp.", reduce_op_name(f[kReduceOp]));
  if (f[kRoot] >= 0) s += c10::str(" rooted at rank ", f[kRoot]);
  return s;
}

// Every rank all-gathers its fingerprint (kPrintFields int64, so Gloo never sees a size mismatch
// here) and raises if any rank called something else.
void check_ranks_agree(c10d::Backend& gloo, const Fingerprint& mine, const char* name) {
  const int size = gloo.getSize();
  constexpr auto n = static_cast<int64_t>(kPrintFields);
  at::Tensor in = at::empty({n}, at::kLong);
  std::copy(mine.begin(), mine.end(), in.data_ptr<int64_t>());
  at::Tensor all = at::empty({size * n}, at::kLong);
  gloo._allgather_base(all, in)->wait();
  const int64_t* p = all.const_data_ptr<int64_t>();
  for (int r = 0; r < size; ++r) {
    Fingerprint theirs;
    std::copy(p + n * r, p + n * (r + 1), theirs.begin());
    TORCH_CHECK(theirs == mine, "vccl ", name, ": the ranks called different collectives: rank ",
                gloo.getRank(), " called ", describe(mine), ", rank ", r, " called ",
                describe(theirs), " (a collective mismatch in the program; no data was moved)");
  }
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
  gloo_->shutdown();
}

void CommBackend::abort() { gloo_->abort(); }

void CommBackend::fail(CommOutcome& outcome, Failure& failure, const std::exception_ptr& e) {
  std::string what = "unknown error";
  try {
    std::rethrow_exception(e);
  } catch (const c10::Error& err) {
    what = err.what_without_backtrace();
  } catch (const std::exception& err) {
    what = err.what();
  } catch (...) {
  }
  {
    std::lock_guard<std::mutex> lock(failure.mu);
    if (!failure.failed.load()) {
      failure.first = std::move(what);
      failure.failed.store(true);
    }
  }
  // Last: whoever sees the Work fail also finds the group broken.
  outcome.finish(e);
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

c10::intrusive_ptr<c10d::Work> CommBackend::submit(Submission s, Launch launch) {
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
  Pending op{alias_specs(s.args), std::move(launch), std::nullopt};
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
  enqueue_task(comm, name,
               [ops = std::move(ops), gloo = gloo_, outcome, print, name, failure = failure_]() {
                 try {
                   // Queued before an earlier collective failed: the group is broken, do not start
                   // it.
                   if (failure->failed.load()) throw_failed(*failure, name);
                   if (print) check_ranks_agree(*gloo, *print, name);
                   // Start every collective of the group before waiting for any (coalesced
                   // send/recv pairs).
                   std::vector<c10::intrusive_ptr<c10d::Work>> works;
                   works.reserve(ops.size());
                   for (const Pending& op : ops) {
                     auto lists = make_aliases(op.args);
                     works.push_back(op.launch(*gloo, lists));
                   }
                   for (auto& work : works) work->wait();
                   outcome->finish(nullptr);
                 } catch (...) {
                   fail(*outcome, *failure, std::current_exception());
                   throw;
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
  enqueue_task(comm, name,
               [op = std::move(op), gloo = gloo_, outcome, posted, failure = failure_, name]() {
                 try {
                   if (failure->failed.load()) throw_failed(*failure, name);
                   auto lists = make_aliases(op.args);
                   *posted = op.launch(*gloo, lists);  // posts the send or receive; does not wait
                 } catch (...) {
                   fail(*outcome, *failure, std::current_exception());
                   throw;
                 }
               });
  order_after(p2p, comm);  // the p2p stream waits for the posting
  enqueue_task(p2p, name, [outcome, posted, failure = failure_]() {
    if (!*posted) return;  // posting failed: the comm stream and the Work report it
    try {
      (*posted)->wait();
      posted->reset();
      outcome->finish(nullptr);
    } catch (...) {
      posted->reset();
      fail(*outcome, *failure, std::current_exception());
      throw;
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

// ---- the collectives: checks, then Gloo's method on the aliases ------------------------------

c10::intrusive_ptr<c10d::Work> CommBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  return submit(
      rooted(Submission{c10d::OpType::BROADCAST, "c10d::broadcast", {tensors}, tensors, tensors},
             opts.rootRank),
      [opts](c10d::Backend& g, TensorLists& a) { return g.broadcast(a[0], opts); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  check_reduce_op(opts.reduceOp, "allreduce");
  return submit(
      reducing(Submission{c10d::OpType::ALLREDUCE, "c10d::allreduce", {tensors}, tensors, tensors},
               opts.reduceOp),
      [opts](c10d::Backend& g, TensorLists& a) { return g.allreduce(a[0], opts); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  check_reduce_op(opts.reduceOp, "allreduce_coalesced");
  return submit(
      reducing(Submission{c10d::OpType::ALLREDUCE_COALESCED,
                          "c10d::allreduce_coalesced",
                          {tensors},
                          tensors,
                          tensors},
               opts.reduceOp),
      [opts](c10d::Backend& g, TensorLists& a) { return g.allreduce_coalesced(a[0], opts); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  check_reduce_op(opts.reduceOp, "reduce");
  return submit(
      rooted(reducing(Submission{c10d::OpType::REDUCE, "c10d::reduce", {tensors}, tensors, tensors},
                      opts.reduceOp),
             opts.rootRank),
      [opts](c10d::Backend& g, TensorLists& a) { return g.reduce(a[0], opts); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == 1 && inputs.size() == 1,
                    "vccl allgather: expects one input tensor and one output list per process");
  check_list_size(outputs[0].size(), size_, "the output list", "allgather");
  TensorLists args{inputs};
  args.insert(args.end(), outputs.begin(), outputs.end());
  return submit({c10d::OpType::ALLGATHER, "c10d::allgather", std::move(args), outputs[0], inputs},
                [opts](c10d::Backend& g, TensorLists& a) {
                  TensorLists out(a.begin() + 1, a.end());
                  return g.allgather(out, a[0], opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(output.numel() == input.numel() * size_, "vccl all_gather_into_tensor: the ",
                    "output must have world_size (", size_, ") times the input's ", input.numel(),
                    " elements, got ", output.numel());
  return submit({c10d::OpType::_ALLGATHER_BASE,
                 "c10d::_allgather_base",
                 {{input, output}},
                 {output},
                 {input}},
                [opts](c10d::Backend& g, TensorLists& a) {
                  // NCCL needs only the element counts; Gloo also checks shapes: flat views.
                  at::Tensor out = a[0][1].view({-1}), in = a[0][0].view({-1});
                  return g._allgather_base(out, in, opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TensorLists args{inputs};
  args.insert(args.end(), outputs.begin(), outputs.end());
  std::vector<at::Tensor> flat;
  for (const auto& list : outputs) flat.insert(flat.end(), list.begin(), list.end());
  return submit({c10d::OpType::ALLGATHER_COALESCED, "c10d::allgather_coalesced", std::move(args),
                 std::move(flat), inputs},
                [opts](c10d::Backend& g, TensorLists& a) {
                  TensorLists out(a.begin() + 1, a.end());
                  return g.allgather_coalesced(out, a[0], opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return submit({c10d::OpType::COALESCED,
                 "c10d::allgather_into_tensor_coalesced",
                 {inputs, outputs},
                 outputs,
                 inputs},
                [opts](c10d::Backend& g, TensorLists& a) {
                  return g.allgather_into_tensor_coalesced(a[1], a[0], opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  if (getRank() == opts.rootRank) {
    TORCH_CHECK_VALUE(outputs.size() == 1,
                      "vccl gather: the destination rank needs one output list");
    check_list_size(outputs[0].size(), size_, "the gather list", "gather");
  }
  TensorLists args{inputs};
  args.insert(args.end(), outputs.begin(), outputs.end());
  std::vector<at::Tensor> result = outputs.empty() ? std::vector<at::Tensor>{} : outputs[0];
  return submit(rooted(Submission{c10d::OpType::GATHER, "c10d::gather", std::move(args),
                                  std::move(result), inputs},
                       opts.rootRank),
                [opts](c10d::Backend& g, TensorLists& a) {
                  TensorLists out(a.begin() + 1, a.end());
                  return g.gather(out, a[0], opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  if (getRank() == opts.rootRank) {
    TORCH_CHECK_VALUE(inputs.size() == 1, "vccl scatter: the source rank needs one input list");
    check_list_size(inputs[0].size(), size_, "the scatter list", "scatter");
  }
  TensorLists args{outputs};
  args.insert(args.end(), inputs.begin(), inputs.end());
  return submit(
      rooted(Submission{c10d::OpType::SCATTER, "c10d::scatter", std::move(args), outputs, outputs},
             opts.rootRank),
      [opts](c10d::Backend& g, TensorLists& a) {
        TensorLists in(a.begin() + 1, a.end());
        return g.scatter(a[0], in, opts);
      });
}

c10::intrusive_ptr<c10d::Work> CommBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  check_reduce_op(opts.reduceOp, "reduce_scatter");
  TORCH_CHECK_VALUE(
      outputs.size() == 1 && inputs.size() == 1,
      "vccl reduce_scatter: expects one output tensor and one input list per process");
  check_list_size(inputs[0].size(), size_, "the input list", "reduce_scatter");
  TensorLists args{outputs};
  args.insert(args.end(), inputs.begin(), inputs.end());
  return submit(reducing(Submission{c10d::OpType::REDUCE_SCATTER, "c10d::reduce_scatter",
                                    std::move(args), outputs, outputs},
                         opts.reduceOp),
                [opts](c10d::Backend& g, TensorLists& a) {
                  TensorLists in(a.begin() + 1, a.end());
                  return g.reduce_scatter(a[0], in, opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_reduce_op(opts.reduceOp, "reduce_scatter_tensor");
  TORCH_CHECK_VALUE(input.numel() == output.numel() * size_, "vccl reduce_scatter_tensor: the ",
                    "input must have world_size (", size_, ") times the output's ", output.numel(),
                    " elements, got ", input.numel());
  return submit(reducing(Submission{c10d::OpType::_REDUCE_SCATTER_BASE,
                                    "c10d::_reduce_scatter_base",
                                    {{output, input}},
                                    {output},
                                    {output}},
                         opts.reduceOp),
                [opts](c10d::Backend& g, TensorLists& a) {
                  at::Tensor out = a[0][0].view({-1}), in = a[0][1].view({-1});
                  return g._reduce_scatter_base(out, in, opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  check_reduce_op(opts.reduceOp, "reduce_scatter_tensor_coalesced");
  return submit(reducing(Submission{c10d::OpType::COALESCED,
                                    "c10d::reduce_scatter_tensor_coalesced",
                                    {outputs, inputs},
                                    outputs,
                                    outputs},
                         opts.reduceOp),
                [opts](c10d::Backend& g, TensorLists& a) {
                  return g.reduce_scatter_tensor_coalesced(a[0], a[1], opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& output_splits,
                                                          std::vector<int64_t>& input_splits,
                                                          const c10d::AllToAllOptions& opts) {
  return submit(
      {c10d::OpType::ALLTOALL_BASE, "c10d::alltoall_base", {{output, input}}, {output}, {}},
      [opts, output_splits, input_splits](c10d::Backend& g, TensorLists& a) {
        auto out_splits = output_splits;
        auto in_splits = input_splits;
        return g.alltoall_base(a[0][0], a[0][1], out_splits, in_splits, opts);
      });
}

c10::intrusive_ptr<c10d::Work> CommBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  check_list_size(outputs.size(), size_, "the output list", "alltoall");
  check_list_size(inputs.size(), size_, "the input list", "alltoall");
  return submit({c10d::OpType::ALLTOALL, "c10d::alltoall", {outputs, inputs}, outputs, {}},
                [opts](c10d::Backend& g, TensorLists& a) { return g.alltoall(a[0], a[1], opts); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                 int tag) {
  return submit(
      {c10d::OpType::SEND, "c10d::send", {tensors}, tensors, {}},
      [dst_rank, tag](c10d::Backend& g, TensorLists& a) { return g.send(a[0], dst_rank, tag); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                 int tag) {
  return submit(
      {c10d::OpType::RECV, "c10d::recv", {tensors}, tensors, {}},
      [src_rank, tag](c10d::Backend& g, TensorLists& a) { return g.recv(a[0], src_rank, tag); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::barrier(const c10d::BarrierOptions& opts) {
  return submit({c10d::OpType::BARRIER, "c10d::barrier", {}, {}, {}, /*host_waits=*/true},
                [opts](c10d::Backend& g, TensorLists&) { return g.barrier(opts); });
}

}  // namespace vdev::backend
