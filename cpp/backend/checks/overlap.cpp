#include "backend/checks/overlap.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include "backend/common/schema_arguments.h"
#include "backend/common/tensor_args.h"

namespace vdev::backend {
bool written_arguments_overlap(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if (!op.schema().is_mutable()) return false;  // nothing written: the common case, no walk
  const auto& args = op.schema().arguments();
  const std::size_t first = stack.size() - args.size();
  struct Arg {
    at::Tensor t;
    bool written;
  };
  c10::SmallVector<Arg, 8> tensors;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool written = is_written(args[i]);
    for_each_tensor(stack[first + i], [&](const at::Tensor& t) {
      if (is_vdev_tensor(t) && t.numel() > 0) tensors.push_back({t, written});
    });
  }
  for (const Arg& w : tensors) {
    if (!w.written) continue;
    if (at::has_internal_overlap(w.t) == at::MemOverlap::Yes) return true;
    for (const Arg& other : tensors) {
      if (other.t.unsafeGetTensorImpl() == w.t.unsafeGetTensorImpl()) continue;
      if (!w.t.storage().is_alias_of(other.t.storage())) continue;
      if (at::get_overlap_status(w.t, other.t) != at::MemOverlapStatus::No) return true;
    }
  }
  return false;
}

}  // namespace vdev::backend
