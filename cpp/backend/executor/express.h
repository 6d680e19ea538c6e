// The express lane: the executor's host path for the hottest operators (element-wise arithmetic,
// activations), called with their arguments unboxed (ops/fallback.cpp registers an unboxed kernel
// for each), which makes a queued call of them cost on the host about what CPU's kernel does.
//
// Why a second path: through the boxed kernel each call boxes its arguments into IValues, and
// copying a tensor that Python owns takes its C++ reference count from 1 to 2, which makes c10
// take the GIL to hold its PyObject (TensorImpl::incref_pyobject; the dispatcher runs with the GIL
// released), and again to let it go. Here a call reads its arguments in place and the task
// captures only their device addresses and metadata (AliasSpec), so no argument's count changes.
//
// The lane takes the boxed path's steps for the calls it serves, asking the same rules: the
// capability profile, the device rule (checks/device_rules.h, on its unboxed tensors: every one a
// strided vdev tensor or a Python number here), the overlap rule for a written argument
// (checks/overlap.h), the launch plan (the boxed path's, from its cache), fresh outputs,
// one OperatorTask. The first call of a signature on a thread (a miss of the lane's per-thread
// table) also runs the boxed path's checks at the call (checks/call_checks.h) on a boxed copy:
// their verdict depends only on what the lane's key holds, for these operators, so the table
// remembers it (a Python number where an operator's device rule wants a vdev tensor, as silu's
// and the activation backwards' do, raises there, and then at every call: nothing is stored).
// Anything else (a CPU tensor, an empty call, a written argument that overlaps another or itself,
// a plan that settles on the host or warns) it declines,
// having changed nothing, and the kernel takes the boxed path.
//
// The key: the operator, the modes (deterministic algorithms, default dtype), every tensor's
// metadata, every other argument's value, except the coefficients (alpha, value, weight: a
// learning rate that changes every step must not make every step a miss), which are keyed by
// kind (integer, floating, complex, boolean): CPU's checks of them look only at their kind, and
// the task runs with the call's own value.
//
// Thread rules: called on the dispatching thread; per-thread tables (no lock on a hit).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

#include "backend/common/export.h"

#include "backend/executor/unboxed_args.h"

namespace vdev::backend {

// An operator of the express lane.
struct DeviceRule;

struct ExpressOperator {
  explicit ExpressOperator(c10::OperatorHandle op);
  c10::OperatorHandle handle;
  const DeviceRule* devices;           // its device rule (checks/device_rules.h), derived once
  bool writes_self;                    // in-place: returns its first argument, written
  std::uint32_t coefficient_args = 0;  // bit i: argument i is alpha, value or weight
};

// Queues `op` on `args` and returns true, with the fresh output in `result` (an in-place
// operator's result is its first argument, left to the caller: no copy of it is made); false when
// the lane declines the call (nothing changed: the caller takes the boxed path).
bool try_express(const ExpressOperator& op, c10::ArrayRef<UnboxedArg> args, at::Tensor& result);

// How many calls the lane has queued on the calling thread (tests: which path a call took).
VDEV_BACKEND_API std::uint64_t express_calls_on_this_thread() noexcept;
// How many calls missed the lane's table on the calling thread (tests: what the key holds).
VDEV_BACKEND_API std::uint64_t express_misses_on_this_thread() noexcept;

}  // namespace vdev::backend
