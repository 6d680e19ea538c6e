// Whether a call's written arguments share memory with other arguments (or with themselves). Such
// a call runs as CPU runs it: synchronously, on CPU aliases that share one CPU Storage per vdev
// Storage (executor/host_run.h).
//
// Why: a queued task makes an independent CPU alias per argument, so ATen's overlap checks
// (MemoryOverlap.h: get_overlap_status compares Storages) cannot see that `neg(m, out=m.t())` or
// `index_select(x, 0, i, out=x[:2])` write what they read, and the kernel computes garbage where
// CPU and CUDA raise "unsupported operation: some elements of the input tensor and the written-to
// tensor refer to a single memory location". With the Storage shared, CPU's own kernel performs
// its own checks on the host, raising at the call, and computes correctly where overlap is legal.
// Such calls are rare; an operator writing its own argument in place (the same TensorImpl) is not
// one of them and stays queued: every in-place operator reaches vdev as its out= form with out
// equal to self. Its task hands the kernel one CPU tensor for both (executor/operator_task.cpp), so
// in-place semantics hold. A kernel that rejects out= equal to an input fails CPU's checks on the
// stand-ins (one stand-in for both, checks/stand_in_check.h); the call then runs on the host as
// well, and raises CPU's error at the call.
//
// Thread rules: stateless; runs on the dispatching thread.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/ArrayRef.h>

#include <cstddef>

namespace vdev::backend {

// One vdev tensor among a call's arguments, as the overlap rule sees it.
struct ArgumentTensor {
  const at::Tensor* tensor;
  std::size_t position;  // of its argument in the schema
  bool written;
  bool out;      // an out= argument (keyword-only, written): the kernel may resize it first
  bool in_list;  // an element of a tensor list
};

// True when a written vdev argument overlaps another vdev argument (a different TensorImpl) or
// itself (more than one element at one address).
// An out= argument counts as overlapping whenever it shares an input's storage, or is itself an
// element of an input list: it may be resized into the input before the kernel's checks.
bool written_arguments_overlap(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

// The same rule on a call's vdev tensors listed one by one, for the express lane
// (executor/express.h), which has its arguments unboxed.
bool written_tensors_overlap(c10::ArrayRef<ArgumentTensor> tensors);

// True when a written vdev argument shares its Storage with any other vdev argument, the same
// tensor passed twice included (masked_select(x, m, out=x)). For calls run synchronously through
// at::native::cpu_fallback, which copies every argument to its own CPU tensor: CPU's overlap
// checks would see none of it, so such a call runs on shared CPU aliases instead.
bool written_arguments_share_storage(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

}  // namespace vdev::backend
