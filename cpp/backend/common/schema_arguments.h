// What an operator's schema says about its arguments: their types seen through Optional and List,
// which argument a return writes, which one is a random operator's Generator.
//
// Every check at a call, the executor and the synchronous paths read schemas the same way through
// these, so that `Tensor?`, `Tensor[]`, `Tensor?[]` and `Generator?` mean one thing everywhere.
//
// Thread rules: stateless.
#pragma once

#include <ATen/core/function_schema.h>

#include <cstddef>
#include <optional>

namespace vdev::backend {

// A schema type with its Optional and List layers taken apart: `Tensor?[]` is a list (not
// optional) of optional elements of kind TensorType; `int[]?` an optional list of IntType.
struct ArgumentType {
  c10::TypeKind element;           // the innermost kind
  bool optional = false;           // T? or T[]?
  bool list = false;               // T[], T?[] or T[]?
  bool optional_elements = false;  // T?[]
  bool is(c10::TypeKind k) const { return element == k; }
};

ArgumentType argument_type(const c10::TypePtr& type);

// Whether an argument is written by the operator (in-place self, out=).
inline bool is_written(const c10::Argument& a) {
  return a.alias_info() != nullptr && a.alias_info()->isWrite();
}

// The argument a return writes (in-place and out= operators), by the schema's alias sets.
std::optional<std::size_t> written_argument(const c10::FunctionSchema& schema,
                                            const c10::Argument& ret);

// The position of the Generator argument in `schema`, if it has one (a random operator).
std::optional<std::size_t> generator_argument(const c10::FunctionSchema& schema);

}  // namespace vdev::backend
