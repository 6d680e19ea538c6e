#include "backend/executor/eligibility.h"

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <unordered_set>

#include "backend/executor/host_checked_results.h"
#include "backend/executor/tensor_args.h"

namespace vdev::backend {
namespace {

c10::TypeKind base_kind(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::OptionalType) {
    return type->expectRef<c10::OptionalType>().getElementType()->kind();
  }
  return type->kind();
}

bool is_tensor_list_type(const c10::TypePtr& type) {
  const c10::TypePtr t = type->kind() == c10::TypeKind::OptionalType
                             ? type->expectRef<c10::OptionalType>().getElementType()
                             : type;
  if (t->kind() != c10::TypeKind::ListType) return false;
  return base_kind(t->expectRef<c10::ListType>().getElementType()) == c10::TypeKind::TensorType;
}

// Operators whose meta kernel disagrees with their CPU kernel on output shapes (found by the
// OpInfo and module sweeps, tests/ops/test_opinfo.py, tests/fidelity/test_modules.py): they run
// synchronously. (Batch norm and embedding bag also disagree, about auxiliary returns: their plans
// take CPU's metadata instead, backend/executor/cpu_shaped_returns.h.)
bool meta_disagrees_with_cpu(const c10::FunctionSchema& schema) {
  static const std::unordered_set<std::string> ops = {
      // 1-d input, reduction none: the meta kernel says [1], CPU (and CUDA) return a 0-dim loss.
      "aten::multilabel_margin_loss_forward",
  };
  return ops.count(schema.name()) != 0;
}

}  // namespace

bool eligible(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
              std::size_t first) {
  if (meta_disagrees_with_cpu(schema)) return false;
  if (reads_results_on_the_host(schema)) return false;  // synchronizes on CUDA too
  for (const c10::Argument& ret : schema.returns()) {
    const bool tensorish =
        base_kind(ret.type()) == c10::TypeKind::TensorType || is_tensor_list_type(ret.type());
    if (!tensorish) return false;  // bool / Scalar / int results need values on the host
    if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) return false;  // a view
  }
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const c10::TypeKind k = base_kind(args[i].type());
    if (k == c10::TypeKind::DeviceObjType) return false;
    const c10::IValue& v = stack[first + i];
    const bool mutated = args[i].alias_info() != nullptr && args[i].alias_info()->isWrite();
    auto ok = [&](const at::Tensor& t) {
      if (!t.defined() || is_vdev_tensor(t)) return true;
      return t.device().is_cpu() && !mutated;  // a CPU tensor is snapshotted: it must be read-only
    };
    if (v.isTensor()) {
      if (!ok(v.toTensor())) return false;
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) {
        if (!ok(t)) return false;
      }
    } else if (v.isOptionalTensorList()) {
      for (const auto& t : v.toOptionalTensorList()) {
        const std::optional<at::Tensor> o = t;
        if (o && !ok(*o)) return false;
      }
    }
  }
  return true;
}

}  // namespace vdev::backend
