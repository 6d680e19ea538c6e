#include "backend/checks/host_checked_results.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/isfinite.h>

#include <string_view>

#include "backend/common/tensor_args.h"

namespace vdev::backend {
namespace {

bool computes_eigenvalues_only(std::string_view name) {
  return name == "aten::_linalg_eigvals" || name == "aten::linalg_eigvals";
}

}  // namespace

bool reads_results_on_the_host(const c10::FunctionSchema& schema) {
  const std::string_view name = schema.name();
  return name == "aten::_linalg_svd" || name == "aten::_linalg_eigh" ||
         name == "aten::linalg_eig" || computes_eigenvalues_only(name);
}

void check_before_cpu_lapack(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if (!computes_eigenvalues_only(op.schema().name())) return;
  const c10::IValue& input = stack[stack.size() - op.schema().arguments().size()];
  if (!input.isTensor() || !is_vdev_tensor(input.toTensor())) return;
  TORCH_CHECK(at::isfinite(input.toTensor()).all().item<bool>(),
              "torch.linalg.eigvals: input tensor should not contain infs or NaNs.");
}

}  // namespace vdev::backend
