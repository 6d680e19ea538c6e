// out= overloads (and in-place siblings) of functional operators, and the out= overloads that
// refused the outputs they were given.
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
#include <c10/util/Exception.h>

#include <optional>

namespace vdev::backend {

std::optional<c10::OperatorHandle> out_variant_of(const c10::OperatorHandle& op);

// The in-place sibling of a functional operator (aten::relu -> aten::relu_), used when it has no
// out= overload or only ATen's generated composite one (relu.out): the same overload name, `self`
// first and written, the other arguments the same, one return aliasing `self`. When the functional
// result has exactly self's metadata, the kernel can run as copy_ into the pre-allocated output and
// the in-place kernel on it, which writes the device bytes directly (no CPU temporary, no second
// copy).
std::optional<c10::OperatorHandle> inplace_variant_of(const c10::OperatorHandle& op);

// Whether `e`, thrown by an out= kernel, says it refused its outputs.
bool out_overload_refused(const c10::Error& e);
void remember_refused_out_overload(const c10::OperatorHandle& out_overload);
bool is_refused_out_overload(const c10::OperatorHandle& out_overload);

}  // namespace vdev::backend
