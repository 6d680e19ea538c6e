// The tensors an aten operator call reads and writes, for its launch description (launch.h: what
// the sanitizer, backend/sanitizer/, checks): from
// its schema's alias annotations, refined by the operator's semantics where the annotations say
// more than the kernels do. Arguments annotated as written (Tensor(a!)) are written: keyword out=
// arguments, the first argument of in-place operators that only overwrite (fill_, zero_, the
// random fills, index_put_, ...) and the written arguments an operator only writes (cummax's
// helpers, rrelu's noise in training, fused SGD's momentum buffers at its first step) without
// being read, other in-place arguments read and written; every other tensor argument is read, and
// fresh outputs are written. The BLAS-style products (addmm, addmv, addr, addbmm, baddbmm) do not
// read self when beta == 0, and rrelu_with_noise out of training does not touch its noise.
//
// Each rule cites the kernel that makes it true. A rule may only narrow what an argument is said
// to read when every kernel (CPU's, which vdev runs, and CUDA's) agrees: a read wrongly dropped
// hides a finding, a read wrongly kept reports one that is not there.
//
// Thread rules: stateless; runs on the dispatching thread.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <optional>
#include <vector>

#include "backend/common/launch.h"

namespace vdev::backend {

// How the call on stack[first, first + nargs) accesses its argument `i` (a schema position), by
// the rules above: for the host runs of sparse and quantized tensors, which report the accesses
// of their arguments' member tensors (layouts/layout_host_run.h).
// Empty: the call does not touch that argument's bytes.
std::optional<Access> argument_access(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                      std::size_t first, std::size_t i);

// Adds to `out` the uses of the call's arguments stack[first, first + nargs) and of `fresh`
// outputs (tensors or tensor lists). Held copies: an optional tensor list's elements are made on
// the fly.
void operator_uses(const c10::OperatorHandle& op, const torch::jit::Stack& stack, std::size_t first,
                   c10::ArrayRef<const c10::IValue*> fresh, HeldUses& out);

// The uses of the call, visited (a launch's derived uses).
inline void visit_operator_uses(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                std::size_t first, c10::ArrayRef<const c10::IValue*> fresh,
                                UseVisitor visit) {
  HeldUses found;
  operator_uses(op, stack, first, fresh, found);
  found.visit(visit);
}

}  // namespace vdev::backend
