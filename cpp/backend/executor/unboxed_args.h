// An operator call's arguments as an unboxed kernel received them, for the express lane
// (executor/express.h) and the task it queues (executor/operator_task.h): tensors by address, so
// that no tensor's reference count changes (see express.h for why that matters), other values as
// IValues (a Scalar, a bool: no reference-counted payload).
//
// Thread rules: values; the tensors they point to belong to the caller and live for the call.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

namespace vdev::backend {

struct UnboxedArg {
  const at::Tensor* tensor = nullptr;  // a tensor argument, or nullptr: `value` is the argument
  c10::IValue value;
};
using UnboxedArgs = c10::SmallVector<UnboxedArg, 4>;

inline void add_unboxed_arg(UnboxedArgs& args, const at::Tensor& t) {
  args.emplace_back();
  args.back().tensor = &t;
}
template <typename T>
void add_unboxed_arg(UnboxedArgs& args, const T& v) {
  args.emplace_back();
  args.back().value = c10::IValue(v);
}

}  // namespace vdev::backend
