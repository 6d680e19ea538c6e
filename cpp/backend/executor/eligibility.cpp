#include "backend/executor/eligibility.h"

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <unordered_set>

#include "backend/checks/host_checked_results.h"
#include "backend/common/schema_arguments.h"
#include "backend/common/tensor_args.h"

namespace vdev::backend {
namespace {

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
    // bool / Scalar / int results need values on the host
    if (!argument_type(ret.type()).is(c10::TypeKind::TensorType)) return false;
    if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) return false;  // a view
  }
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ArgumentType type = argument_type(args[i].type());
    if (!type.list && type.is(c10::TypeKind::DeviceObjType)) return false;
    const bool written = is_written(args[i]);
    // A CPU tensor is snapshotted: it must be read-only.
    const bool refused = any_tensor(stack[first + i], [&](const at::Tensor& t) {
      return t.defined() && !is_vdev_tensor(t) && (!t.device().is_cpu() || written);
    });
    if (refused) return false;
  }
  return true;
}

}  // namespace vdev::backend
