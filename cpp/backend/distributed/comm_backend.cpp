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

#include "backend/common/check.h"
#include "backend/common/stream_lookup.h"
#include "backend/common/task.h"
#include "backend/common/vdev_device.h"
#include "backend/distributed/comm_work.h"
#include "backend/distributed/dist_fault.h"
#include "backend/memory/allocator.h"
#include "backend/sanitizer/stream_sanitizer.h"
#include "runtime/event.h"

namespace vdev::backend {
namespace {

// ---- checks made at the call ---------------------------------------------------------------
// Whatever depends only on the arguments (not on other ranks, not on data) is checked here, on the
// host, before anything is queued: it raises with the type and message NCCL gives (or Gloo's,
// where vccl is stricter than NCCL because Gloo computes), and the group stays usable. Gloo's own
// checks would otherwise run inside the comm stream's task, fail it and break the group.

// NCCL's data types (ncclDataType in torch 2.13's c10d/NCCLUtils.hpp), plus complex, which torch
// and NCCL view as pairs of reals. Gloo has the same types but float8: vccl moves float8 bytes as
// uint8 (alias_specs), as NCCL without float8 support does.
bool nccl_has(c10::ScalarType t) {
  switch (t) {
    case at::kChar:
    case at::kByte:
    case at::kFloat:
    case at::kDouble:
    case at::kInt:
    case at::kLong:
    case at::kHalf:
    case at::kBool:
    case at::kBFloat16:
    case at::kFloat8_e5m2:
    case at::kFloat8_e4m3fn:
    case at::kFloat8_e4m3fnuz:
    case at::kFloat8_e5m2fnuz:
    case at::kComplexHalf:
    case at::kComplexFloat:
    case at::kComplexDouble:
      return true;
    default:
      return false;
  }
}

// NCCL's check_gpu_single_tensor and getNcclDataType, for vdev.
void check_tensor(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(t.defined(), "vccl ", name, ": undefined tensor");
  TORCH_CHECK_VALUE(t.device().type() == kVdev && t.layout() == c10::kStrided, "vccl ", name,
                    ": tensors must be vdev and dense, got a ", t.device().type(), " ", t.layout(),
                    " tensor (use the gloo backend for CPU tensors)");
  TORCH_CHECK_VALUE(t.is_contiguous(t.suggest_memory_format()), "vccl ", name,
                    ": tensors must be contiguous, got one of sizes ", t.sizes(), " and strides ",
                    t.strides());
  TORCH_CHECK_TYPE(nccl_has(t.scalar_type()), "vccl ", name,
                   ": Input tensor data type is not supported for vccl process group: ",
                   t.scalar_type(), " (vccl has NCCL's data types)");
}

const char* reduce_op_name(int64_t op) {
  static constexpr const char* kNames[] = {"SUM",  "AVG", "PRODUCT", "MIN",        "MAX",
                                           "BAND", "BOR", "BXOR",    "PREMUL_SUM", "UNUSED"};
  return op >= 0 && op < 10 ? kNames[op] : "(mixed)";
}

// How Gloo runs a reduction NCCL defines: the op handed to Gloo, and whether the result is then
// divided by the group's size (integer AVG).
struct Reduction {
  c10d::ReduceOp op;
  bool divide = false;
};

// The reduce op against the dtype, at the call. NCCL's rules where NCCL has the op; Gloo's for the
// bitwise ops (Gloo only). Gloo would check these on its worker, inside the comm task.
Reduction check_reduction(const c10d::ReduceOp& op, c10::ScalarType dtype, const char* name) {
  const auto kind = op.op_;
  TORCH_CHECK_VALUE(kind != c10d::ReduceOp::PREMUL_SUM && kind != c10d::ReduceOp::UNUSED, "vccl ",
                    name, ": ReduceOp.", reduce_op_name(kind),
                    " is not supported; vccl (built on Gloo) has SUM, AVG, PRODUCT, MIN, MAX, "
                    "BAND, BOR and BXOR");
  // NCCL: "Unsupported Float8 type for NCCL reduction" (for the float8 types it cannot reduce);
  // Gloo has no float8 arithmetic at all.
  TORCH_CHECK(!c10::isFloat8Type(dtype), "vccl ", name,
              ": Unsupported Float8 type for vccl reduction: ", dtype,
              " (vccl reduces with Gloo, which has no float8 arithmetic; float8 tensors can be "
              "broadcast, gathered, scattered, exchanged and sent)");
  if (c10::isComplexType(dtype)) {
    TORCH_CHECK_VALUE(c10d::isComplexViewAsRealAllowed(op), "vccl ", name, ": ReduceOp.",
                      reduce_op_name(kind), " is not supported on complex tensors");
  }
  const bool bitwise =
      kind == c10d::ReduceOp::BAND || kind == c10d::ReduceOp::BOR || kind == c10d::ReduceOp::BXOR;
  TORCH_CHECK(!bitwise || c10::isIntegralType(dtype, /*includeBool=*/true), "vccl ", name,
              ": Cannot use ReduceOp.", reduce_op_name(kind), " with non-integral dtype ", dtype);
  if (dtype == at::kBool) {
    TORCH_CHECK_TYPE(kind != c10d::ReduceOp::AVG, "vccl ", name,
                     ": Cannot use ReduceOp.AVG with boolean inputs");
    // NCCL's mapping: a bool SUM is a MAX (a logical or); Gloo would add the bytes.
    if (kind == c10d::ReduceOp::SUM) return {c10d::ReduceOp(c10d::ReduceOp::MAX)};
  }
  if (kind == c10d::ReduceOp::AVG && c10::isIntegralType(dtype, /*includeBool=*/false)) {
    // NCCL's integer AVG is a sum divided by the group's size, rounded toward zero
    // (ncclDevSumPostDiv); Gloo's AVG divides in place, which fails for integers after the data
    // moved.
    return {c10d::ReduceOp(c10d::ReduceOp::SUM), true};
  }
  return {op};
}

void check_list_size(std::size_t got, int expected, const char* what, const char* name) {
  TORCH_CHECK_VALUE(got == static_cast<std::size_t>(expected), "vccl ", name, ": ", what,
                    " must hold world_size (", expected, ") tensors, got ", got);
}

void check_one_tensor(const std::vector<at::Tensor>& tensors, const char* name) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "vccl ", name, ": expects one tensor per process, got ",
                    tensors.size());
}

// NCCL's gather/scatter (ValueError) and Gloo's assertTypeAndSizesMatch: each tensor of `list`
// has `like`'s dtype and sizes.
void check_like(const std::vector<at::Tensor>& list, const at::Tensor& like, const char* name) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    TORCH_CHECK_TYPE(list[i].scalar_type() == like.scalar_type(), "vccl ", name,
                     ": invalid tensor type at index ", i, " (expected ", like.scalar_type(),
                     ", got ", list[i].scalar_type(), ")");
    TORCH_CHECK_VALUE(list[i].sizes() == like.sizes(), "vccl ", name,
                      ": invalid tensor size at index ", i, " (expected ", like.sizes(), ", got ",
                      list[i].sizes(), ")");
  }
}

// An output and input that only need the same dtype and a number of elements (NCCL's
// all_gather_into_tensor and reduce_scatter_tensor): `big` has world_size times `small`'s.
void check_world_multiple(const at::Tensor& big, const at::Tensor& small, int size,
                          const char* big_name, const char* small_name, const char* name) {
  TORCH_CHECK_TYPE(big.scalar_type() == small.scalar_type(), "vccl ", name, ": the ", big_name,
                   " tensor must have the same type as the ", small_name, " tensor, got ",
                   big.scalar_type(), " and ", small.scalar_type());
  TORCH_CHECK_VALUE(big.numel() == small.numel() * size, "vccl ", name, ": the ", big_name,
                    " must have world_size (", size, ") times the ", small_name, "'s ",
                    small.numel(), " elements, got ", big.numel());
}

// Broadcast and reduce: NCCL's ncclInvalidArgument ("invalid root"), which torch raises as
// DistBackendError at the call; Gloo raises "invalid root rank" at the call.
void check_root_rank(int64_t root, int size, const char* name) {
  TORCH_CHECK_WITH(DistBackendError, root >= 0 && root < size, "vccl ", name,
                   ": invalid root rank: ", root, " (root should be in the 0..", size - 1,
                   " range)");
}

// Gather and scatter: ProcessGroupNCCL checks the root as Gloo does, with ValueError.
void check_root_rank_value(int64_t root, int size, const char* name) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, "vccl ", name, ": invalid root rank: ", root,
                    " (root should be in the 0..", size - 1, " range)");
}

void check_peer(int peer, int tag, int rank, int size, const char* name) {
  TORCH_CHECK_VALUE(peer >= 0 && peer < size, "vccl ", name, ": invalid peer rank: ", peer,
                    " (the peer should be in the 0..", size - 1, " range)");
  // isend/irecv to this rank itself: NCCL runs them, Gloo has no pair to itself (its transport
  // fails the transfer), so vccl refuses them at the call.
  TORCH_CHECK_NOT_IMPLEMENTED(peer != rank, "vccl ", name, ": a ", name,
                              " with this rank itself (rank ", rank,
                              ") as the peer is not "
                              "supported: Gloo, which vccl runs on, has no pair to itself "
                              "(NCCL runs it)");
  // Gloo's checkTag: sends and receives are matched by tag.
  TORCH_CHECK(tag >= 0, "vccl ", name, ": Tag must be nonnegative, got ", tag);
}

// Integer AVG: the sum Gloo left in `tensors`, divided by the group's size as NCCL does.
void divide_by(std::vector<at::Tensor>& tensors, int size) {
  for (at::Tensor& t : tensors) t.div_(size, "trunc");
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

// The bytes a collective moves, for the task observers (the profiler): its first tensor list.
vdev::rt::TaskTag collective_tag(const std::vector<std::vector<AliasSpec>>& args) {
  std::uint64_t bytes = 0;
  if (!args.empty()) {
    for (const AliasSpec& a : args.front()) {
      std::uint64_t n = c10::elementSize(a.dtype);
      for (int64_t d : a.sizes) n *= static_cast<std::uint64_t>(d);
      bytes += n;
    }
  }
  return vdev::rt::TaskTag{vdev::rt::TaskKind::kCollective, bytes};
}

// What a collective reads and writes, for the stream sanitizer: its outputs (what its Work holds)
// are written (reductions in place read them first), every other tensor is read.
std::vector<TensorUse> collective_uses(c10d::OpType type,
                                       const std::vector<std::vector<at::Tensor>>& args,
                                       const std::vector<at::Tensor>& outputs) {
  const bool in_place_reduction = type == c10d::OpType::ALLREDUCE || type == c10d::OpType::REDUCE ||
                                  type == c10d::OpType::ALLREDUCE_COALESCED;
  std::vector<TensorUse> uses;
  for (const auto& list : args) {
    for (const at::Tensor& t : list) {
      const bool output = std::any_of(outputs.begin(), outputs.end(), [&](const at::Tensor& o) {
        return o.unsafeGetTensorImpl() == t.unsafeGetTensorImpl();
      });
      uses.push_back({t, !output ? Access::kRead
                                 : (in_place_reduction ? Access::kReadWrite : Access::kWrite)});
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
  Pending op{alias_specs(s.args), std::move(launch), std::nullopt, std::move(s.finish), {}};
  if (C10_UNLIKELY(sanitizing_accesses())) op.uses = collective_uses(s.type, s.args, s.outputs);
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
  if (C10_UNLIKELY(sanitizing_accesses())) {
    std::vector<TensorUse> uses;
    for (const Pending& op : ops) uses.insert(uses.end(), op.uses.begin(), op.uses.end());
    sanitize_queued(comm, name, uses);
  }
  // The task must not hold the caller's tensors: released on a worker, a tensor Python still
  // knows needs the GIL, which a host thread waiting for the stream may hold.
  for (Pending& op : ops) op.uses.clear();
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
  vdev::rt::TaskTag tag{vdev::rt::TaskKind::kCollective};
  for (const Pending& op : ops) tag.bytes += collective_tag(op.args).bytes;
  const bool faulted = take_dist_fault();
  enqueue_task(
      comm, name,
      [ops = std::move(ops), gloo = gloo_, outcome, print, name, failure = failure_, faulted,
       closed = closed_]() {
        try {
          if (faulted) act_on_dist_fault(gloo->getBackendOptions()->timeout, *closed, name);
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
            works.push_back(op.launch(*gloo, lists.back()));
          }
          for (auto& work : works) work->wait();
          for (std::size_t i = 0; i < ops.size(); ++i) {
            if (ops[i].finish) ops[i].finish(lists[i]);
          }
          outcome->finish(nullptr);
        } catch (...) {
          fail(*outcome, *failure, std::current_exception(), name);
        }
      },
      tag);
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
  if (C10_UNLIKELY(sanitizing_accesses())) sanitize_queued(comm, name, op.uses);
  op.uses.clear();  // not into the task: see queue_locked
  const vdev::rt::TaskTag tag = collective_tag(op.args);
  const bool faulted = take_dist_fault();
  enqueue_task(
      comm, name,
      [op = std::move(op), gloo = gloo_, outcome, posted, failure = failure_, name, faulted,
       closed = closed_]() {
        try {
          if (faulted) act_on_dist_fault(gloo->getBackendOptions()->timeout, *closed, name);
          if (failure->failed.load()) throw_failed(*failure, name);
          auto lists = make_aliases(op.args);
          *posted = op.launch(*gloo, lists);  // posts the send or receive; does not wait
        } catch (...) {
          fail(*outcome, *failure, std::current_exception(), name);
        }
      },
      tag);
  order_after(p2p, comm);  // the p2p stream waits for the posting
  enqueue_task(p2p, name, [outcome, posted, failure = failure_, name]() {
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

// ---- the collectives: checks, then Gloo's method on the aliases ------------------------------
// Each method checks its arguments at the call (see "checks made at the call" above); tensors are
// checked one by one in submit().

c10::intrusive_ptr<c10d::Work> CommBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  check_one_tensor(tensors, "broadcast");
  check_root_rank(opts.rootRank, size_, "broadcast");
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "vccl broadcast: invalid root tensor: ", opts.rootTensor);
  return submit(
      rooted(Submission{c10d::OpType::BROADCAST, "c10d::broadcast", {tensors}, tensors, tensors},
             opts.rootRank),
      [opts](c10d::Backend& g, TensorLists& a) { return g.broadcast(a[0], opts); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  check_one_tensor(tensors, "allreduce");
  const Reduction r = check_reduction(opts.reduceOp, tensors[0].scalar_type(), "allreduce");
  Submission s =
      reducing(Submission{c10d::OpType::ALLREDUCE, "c10d::allreduce", {tensors}, tensors, tensors},
               opts.reduceOp);
  if (r.divide) s.finish = [size = size_](TensorLists& a) { divide_by(a[0], size); };
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    return g.allreduce(a[0], gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "vccl allreduce_coalesced: requires non-empty tensor list");
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK_TYPE(t.scalar_type() == tensors[0].scalar_type(),
                     "vccl allreduce_coalesced: tensors must all have the same type, got ",
                     tensors[0].scalar_type(), " and ", t.scalar_type());
  }
  const Reduction r =
      check_reduction(opts.reduceOp, tensors[0].scalar_type(), "allreduce_coalesced");
  Submission s = reducing(Submission{c10d::OpType::ALLREDUCE_COALESCED,
                                     "c10d::allreduce_coalesced",
                                     {tensors},
                                     tensors,
                                     tensors},
                          opts.reduceOp);
  if (r.divide) s.finish = [size = size_](TensorLists& a) { divide_by(a[0], size); };
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    return g.allreduce_coalesced(a[0], gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  check_one_tensor(tensors, "reduce");
  check_root_rank(opts.rootRank, size_, "reduce");
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "vccl reduce: invalid root tensor: ", opts.rootTensor);
  const Reduction r = check_reduction(opts.reduceOp, tensors[0].scalar_type(), "reduce");
  Submission s =
      rooted(reducing(Submission{c10d::OpType::REDUCE, "c10d::reduce", {tensors}, tensors, tensors},
                      opts.reduceOp),
             opts.rootRank);
  if (r.divide && getRank() == opts.rootRank) {
    s.finish = [size = size_](TensorLists& a) { divide_by(a[0], size); };
  }
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    return g.reduce(a[0], gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == 1 && inputs.size() == 1,
                    "vccl allgather: expects one input tensor and one output list per process");
  check_list_size(outputs[0].size(), size_, "the output list", "allgather");
  // Gloo gathers tensors of the input's size only (NCCL also gathers uneven ones).
  check_like(outputs[0], inputs[0], "allgather");
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
  check_world_multiple(output, input, size_, "output", "input", "all_gather_into_tensor");
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
  // Gloo's checks of allgather_coalesced.
  TORCH_CHECK_VALUE(!inputs.empty(), "vccl allgather_coalesced: requires non-empty input list");
  check_list_size(outputs.size(), size_, "the output lists", "allgather_coalesced");
  for (const auto& list : outputs) {
    TORCH_CHECK_VALUE(list.size() == inputs.size(),
                      "vccl allgather_coalesced: invalid output size: (expected length ",
                      inputs.size(), ", got ", list.size(), ")");
    for (std::size_t i = 0; i < list.size(); ++i)
      check_like({list[i]}, inputs[i], "allgather_coalesced");
  }
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
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "vccl allgather_into_tensor_coalesced: ",
                    "requires input/output tensor lists to have the same length, got ",
                    inputs.size(), " and ", outputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_world_multiple(outputs[i], inputs[i], size_, "output", "input",
                         "allgather_into_tensor_coalesced");
  }
  return submit({c10d::OpType::COALESCED,
                 "c10d::allgather_into_tensor_coalesced",
                 {inputs, outputs},
                 outputs,
                 inputs},
                [opts](c10d::Backend& g, TensorLists& a) {
                  // As _allgather_base: NCCL needs only element counts, so flat views.
                  std::vector<at::Tensor> in, out;
                  for (const at::Tensor& t : a[0]) in.push_back(t.view({-1}));
                  for (const at::Tensor& t : a[1]) out.push_back(t.view({-1}));
                  return g.allgather_into_tensor_coalesced(out, in, opts);
                });
}

c10::intrusive_ptr<c10d::Work> CommBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  check_root_rank_value(opts.rootRank, size_, "gather");
  check_one_tensor(inputs, "gather");
  if (getRank() == opts.rootRank) {
    TORCH_CHECK_VALUE(outputs.size() == 1,
                      "vccl gather: the destination rank needs one output list");
    check_list_size(outputs[0].size(), size_, "the gather list", "gather");
    check_like(outputs[0], inputs[0], "gather");
  } else {
    TORCH_CHECK_VALUE(outputs.empty(), "vccl gather: requires empty output on non-root");
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
  check_root_rank_value(opts.rootRank, size_, "scatter");
  check_one_tensor(outputs, "scatter");
  if (getRank() == opts.rootRank) {
    TORCH_CHECK_VALUE(inputs.size() == 1, "vccl scatter: the source rank needs one input list");
    check_list_size(inputs[0].size(), size_, "the scatter list", "scatter");
    check_like(inputs[0], outputs[0], "scatter");
  } else {
    TORCH_CHECK_VALUE(inputs.empty(), "vccl scatter: requires empty input on non-root");
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
  TORCH_CHECK_VALUE(
      outputs.size() == 1 && inputs.size() == 1,
      "vccl reduce_scatter: expects one output tensor and one input list per process");
  check_list_size(inputs[0].size(), size_, "the input list", "reduce_scatter");
  // Gloo reduces inputs of the output's size only (NCCL also reduces uneven ones).
  check_like(inputs[0], outputs[0], "reduce_scatter");
  const Reduction r = check_reduction(opts.reduceOp, outputs[0].scalar_type(), "reduce_scatter");
  TensorLists args{outputs};
  args.insert(args.end(), inputs.begin(), inputs.end());
  Submission s = reducing(Submission{c10d::OpType::REDUCE_SCATTER, "c10d::reduce_scatter",
                                     std::move(args), outputs, outputs},
                          opts.reduceOp);
  if (r.divide) s.finish = [size = size_](TensorLists& a) { divide_by(a[0], size); };
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    TensorLists in(a.begin() + 1, a.end());
    return g.reduce_scatter(a[0], in, gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_world_multiple(input, output, size_, "input", "output", "reduce_scatter_tensor");
  const Reduction r = check_reduction(opts.reduceOp, output.scalar_type(), "reduce_scatter_tensor");
  Submission s = reducing(Submission{c10d::OpType::_REDUCE_SCATTER_BASE,
                                     "c10d::_reduce_scatter_base",
                                     {{output, input}},
                                     {output},
                                     {output}},
                          opts.reduceOp);
  if (r.divide) {
    s.finish = [size = size_](TensorLists& a) {
      std::vector<at::Tensor> out{a[0][0]};
      divide_by(out, size);
    };
  }
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    at::Tensor out = a[0][0].view({-1}), in = a[0][1].view({-1});
    return g._reduce_scatter_base(out, in, gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !outputs.empty(),
                    "vccl reduce_scatter_tensor_coalesced: requires input/output tensor lists ",
                    "of the same, non-zero length, got ", inputs.size(), " and ", outputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_world_multiple(inputs[i], outputs[i], size_, "input", "output",
                         "reduce_scatter_tensor_coalesced");
    TORCH_CHECK_TYPE(outputs[i].scalar_type() == outputs[0].scalar_type(),
                     "vccl reduce_scatter_tensor_coalesced: tensors must all have the same type");
  }
  const Reduction r =
      check_reduction(opts.reduceOp, outputs[0].scalar_type(), "reduce_scatter_tensor_coalesced");
  Submission s = reducing(Submission{c10d::OpType::COALESCED,
                                     "c10d::reduce_scatter_tensor_coalesced",
                                     {outputs, inputs},
                                     outputs,
                                     outputs},
                          opts.reduceOp);
  if (r.divide) s.finish = [size = size_](TensorLists& a) { divide_by(a[0], size); };
  auto gloo_opts = opts;
  gloo_opts.reduceOp = r.op;
  return submit(std::move(s), [gloo_opts](c10d::Backend& g, TensorLists& a) {
    // As _reduce_scatter_base: NCCL needs only element counts, so flat views.
    std::vector<at::Tensor> out, in;
    for (const at::Tensor& t : a[0]) out.push_back(t.view({-1}));
    for (const at::Tensor& t : a[1]) in.push_back(t.view({-1}));
    return g.reduce_scatter_tensor_coalesced(out, in, gloo_opts);
  });
}

c10::intrusive_ptr<c10d::Work> CommBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& output_splits,
                                                          std::vector<int64_t>& input_splits,
                                                          const c10d::AllToAllOptions& opts) {
  // ProcessGroupNCCL::alltoall_base's checks (c10d's checkSplitSizes: RuntimeError).
  TORCH_CHECK_TYPE(output.scalar_type() == input.scalar_type(),
                   "vccl all_to_all_single: the output tensor must have the same type as the ",
                   "input tensor, got ", output.scalar_type(), " and ", input.scalar_type());
  TORCH_CHECK_VALUE(output.dim() > 0 && input.dim() > 0,
                    "vccl all_to_all_single: tensors need at least one dimension");
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK_VALUE(output.numel() == input.numel(), "vccl all_to_all_single: ",
                      "Tensors are not equal in size or data type: ", output.numel(), " and ",
                      input.numel(), " elements");
    c10d::checkSplitSizes(input_splits, input, size_);
  } else {
    c10d::checkSplitSizes(input_splits, input, size_);
    c10d::checkSplitSizes(output_splits, output, size_);
  }
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
  // Gloo: "input and output tensors must have the same size" (NCCL also exchanges uneven ones).
  check_like(inputs, inputs[0], "alltoall");
  check_like(outputs, inputs[0], "alltoall");
  return submit({c10d::OpType::ALLTOALL, "c10d::alltoall", {outputs, inputs}, outputs, {}},
                [opts](c10d::Backend& g, TensorLists& a) { return g.alltoall(a[0], a[1], opts); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                 int tag) {
  check_one_tensor(tensors, "send");
  check_peer(dst_rank, tag, rank_, size_, "send");
  return submit(
      {c10d::OpType::SEND, "c10d::send", {tensors}, tensors, {}},
      [dst_rank, tag](c10d::Backend& g, TensorLists& a) { return g.send(a[0], dst_rank, tag); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                 int tag) {
  check_one_tensor(tensors, "recv");
  check_peer(src_rank, tag, rank_, size_, "recv");
  return submit(
      {c10d::OpType::RECV, "c10d::recv", {tensors}, tensors, {}},
      [src_rank, tag](c10d::Backend& g, TensorLists& a) { return g.recv(a[0], src_rank, tag); });
}

c10::intrusive_ptr<c10d::Work> CommBackend::barrier(const c10d::BarrierOptions& opts) {
  return submit({c10d::OpType::BARRIER, "c10d::barrier", {}, {}, {}, /*host_waits=*/true},
                [opts](c10d::Backend& g, TensorLists&) { return g.barrier(opts); });
}

}  // namespace vdev::backend
