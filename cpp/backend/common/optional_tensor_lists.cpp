#include "backend/common/optional_tensor_lists.h"

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>

#include <optional>

#include "backend/common/schema_arguments.h"

namespace vdev::backend {
namespace {

bool is_optional_tensor_list_type(const c10::TypePtr& type) {
  const ArgumentType t = argument_type(type);
  return t.list && !t.optional && t.optional_elements && t.is(c10::TypeKind::TensorType);
}

}  // namespace

void canonicalize_optional_tensor_lists(const c10::OperatorHandle& op, torch::jit::Stack& stack) {
  const auto& args = op.schema().arguments();
  const std::size_t first = stack.size() - args.size();
  for (std::size_t i = 0; i < args.size(); ++i) {
    c10::IValue& v = stack[first + i];
    if (!v.isList() || v.isOptionalTensorList() || !is_optional_tensor_list_type(args[i].type())) {
      continue;
    }
    c10::List<std::optional<at::Tensor>> canonical;
    for (const c10::IValue& e : v.toListRef()) {
      canonical.push_back(e.isNone() ? std::nullopt : std::optional<at::Tensor>(e.toTensor()));
    }
    v = c10::IValue(std::move(canonical));
  }
}

}  // namespace vdev::backend
