// out= overloads of functional operators (and equivalent out= kernels), and the ones that refused
// the outputs they were given.
//
// A schema O is the out variant of F when they share the operator name, O's leading arguments are
// F's arguments (same names and types, same order), and the rest are exactly one mutable Tensor
// argument per return of F (aten::add.Tensor -> aten::add.out). With it, an asynchronous kernel
// writes its results straight into pre-allocated device memory. Lookups are cached per operator.
//
// Some out= kernels cannot write into the outputs the meta kernel described: they resize them to
// an intermediate shape (mse_loss.out with a reduction) or insist on other dtypes (bfloat16
// native_layer_norm.out keeps mean/rstd in bfloat16 where the meta kernel, like CUDA, says
// float). out_overload_refused() recognises that error; a refused overload is remembered, and plans
// made later use the functional form plus a copy instead (plans made earlier carry their own flag,
// LaunchPlan::out_refused).
//
// Thread rules: safe from any thread (each table is under its own mutex; the operator table is
// read once). Stream workers call remember_refused_out_overload.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/Exception.h>

#include <optional>
#include <vector>

namespace vdev::backend {

std::optional<c10::OperatorHandle> out_variant_of(const c10::OperatorHandle& op);

// An out= kernel that computes exactly what `op` computes on these arguments, given `extra_args`
// after op's own: CPU's relu is clamp_min(self, 0) (aten/src/ATen/native/Activation.cpp), so relu
// (but not of bool, which relu rejects) runs as clamp_min.out, one pass over the bytes.
struct EquivalentOut {
  c10::OperatorHandle op;
  std::vector<c10::IValue> extra_args;
};
std::optional<EquivalentOut> equivalent_out_kernel(const c10::OperatorHandle& op,
                                                   const torch::jit::Stack& stack,
                                                   std::size_t first);

// Whether `e`, thrown by an out= kernel, says it refused its outputs.
bool out_overload_refused(const c10::Error& e);
void remember_refused_out_overload(const c10::OperatorHandle& out_overload);
bool is_refused_out_overload(const c10::OperatorHandle& out_overload);

}  // namespace vdev::backend
