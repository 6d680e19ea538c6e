// Finds the out= overload of a functional operator (aten::add.Tensor -> aten::add.out), so that an
// asynchronous kernel can write its results straight into pre-allocated device memory.
//
// A schema O is the out variant of F when they share the operator name, O's leading arguments are
// F's arguments (same names and types, same order), and the rest are exactly one mutable Tensor
// argument per return of F. Results are cached per operator.
//
// Thread rules: safe from any thread (the cache is under a mutex; the operator table is read once).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>

namespace vdev::backend {

std::optional<c10::OperatorHandle> out_variant_of(const c10::OperatorHandle& op);

}  // namespace vdev::backend
