#include "backend/checks/overlap.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include "backend/common/schema_arguments.h"
#include "backend/common/tensor_args.h"

namespace vdev::backend {
namespace {

struct Arg {
  at::Tensor t;
  std::size_t position;  // of its argument in the schema
  bool written;
  bool out;      // an out= argument (keyword-only, written): the kernel may resize it first
  bool in_list;  // an element of a tensor list
};

c10::SmallVector<Arg, 8> vdev_tensor_arguments(const c10::OperatorHandle& op,
                                               const torch::jit::Stack& stack) {
  const auto& args = op.schema().arguments();
  const std::size_t first = stack.size() - args.size();
  c10::SmallVector<Arg, 8> tensors;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool written = is_written(args[i]);
    const c10::IValue& v = stack[first + i];
    const bool in_list = !v.isTensor();
    for_each_tensor(v, [&](const at::Tensor& t) {
      if (is_vdev_tensor(t)) {
        tensors.push_back({t, i, written, written && args[i].kwarg_only(), in_list});
      }
    });
  }
  return tensors;
}

bool same_tensor(const Arg& a, const Arg& b) {
  return a.t.unsafeGetTensorImpl() == b.t.unsafeGetTensorImpl();
}

}  // namespace

bool written_tensors_overlap(c10::ArrayRef<ArgumentTensor> tensors) {
  for (const ArgumentTensor& w : tensors) {
    if (!w.written) continue;
    const at::Tensor& wt = *w.tensor;
    if (wt.numel() > 0 && at::has_internal_overlap(wt) == at::MemOverlap::Yes) return true;
    for (const ArgumentTensor& other : tensors) {
      const bool same = other.tensor->unsafeGetTensorImpl() == wt.unsafeGetTensorImpl();
      if (other.position == w.position && same) continue;
      if (!wt.storage().is_alias_of(other.tensor->storage())) continue;
      if (same) {
        // The in-place form (out= is self) stays queued (see the header); the same tensor
        // inside a list (cat((x, y), out=x)) is an input the resized out overwrites.
        if (w.out && other.in_list) return true;
        continue;
      }
      // CPU's and CUDA's out= kernels resize out before their overlap checks: a view that shares
      // an input's storage without overlapping it yet (gather(i, 0, i[1:], out=i[:1]), an empty
      // out) may overlap once resized. CPU's own kernel on shared aliases decides.
      if (w.out) return true;
      if (wt.numel() == 0 || other.tensor->numel() == 0) continue;
      if (at::get_overlap_status(wt, *other.tensor) != at::MemOverlapStatus::No) return true;
    }
  }
  return false;
}

bool written_arguments_overlap(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if (!op.schema().is_mutable()) return false;  // nothing written: the common case, no walk
  const c10::SmallVector<Arg, 8> args = vdev_tensor_arguments(op, stack);
  c10::SmallVector<ArgumentTensor, 8> tensors;
  for (const Arg& a : args) tensors.push_back({&a.t, a.position, a.written, a.out, a.in_list});
  return written_tensors_overlap(tensors);
}

bool written_arguments_share_storage(const c10::OperatorHandle& op,
                                     const torch::jit::Stack& stack) {
  if (!op.schema().is_mutable()) return false;
  const c10::SmallVector<Arg, 8> tensors = vdev_tensor_arguments(op, stack);
  for (const Arg& w : tensors) {
    if (!w.written) continue;
    for (const Arg& other : tensors) {
      if (other.position == w.position && same_tensor(other, w)) continue;
      if (w.t.storage().is_alias_of(other.t.storage())) return true;
    }
  }
  return false;
}

}  // namespace vdev::backend
