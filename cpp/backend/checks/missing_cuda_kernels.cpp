#include "backend/checks/missing_cuda_kernels.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <string>
#include <string_view>
#include <unordered_map>

#include "backend/common/tensor_args.h"

namespace vdev::backend {
namespace {

// A matrix product: the name CUDA's dtype dispatch gives it, and which arguments hold its
// operands (the first tensor of the schema is self for addmm-like forms).
struct Product {
  const char* cuda_name;
  int first_operand;  // 0 for mm/bmm/mv/dot, 1 for addmm/baddbmm/addmv (after `self`)
};

const Product* product_of(std::string_view name) {
  static const std::unordered_map<std::string_view, Product> products = {
      {"aten::mm", {"addmm_cuda", 0}},
      {"aten::addmm", {"addmm_cuda", 1}},
      {"aten::addmm_", {"addmm_cuda", 1}},
      {"aten::bmm", {"baddbmm_cuda", 0}},
      {"aten::baddbmm", {"baddbmm_cuda", 1}},
      {"aten::baddbmm_", {"baddbmm_cuda", 1}},
      {"aten::mv", {"addmv_impl_cuda", 0}},
      {"aten::addmv", {"addmv_impl_cuda", 1}},
      {"aten::addmv_", {"addmv_impl_cuda", 1}},
      {"aten::dot", {"dot", 0}},
      {"aten::vdot", {"vdot", 0}},
      {"aten::addbmm", {"addmm_cuda", 1}},
      {"aten::addbmm_", {"addmm_cuda", 1}},
      {"aten::_addmm_activation", {"addmm_cuda", 1}},
  };
  auto it = products.find(name);
  return it == products.end() ? nullptr : &it->second;
}

bool cuda_multiplies(c10::ScalarType t) {
  return c10::isFloatingType(t) || t == c10::ScalarType::ComplexFloat ||
         t == c10::ScalarType::ComplexDouble;
}

void refuse_integer_product(const Product& p, const torch::jit::Stack& stack, std::size_t first) {
  const c10::IValue& a_value = stack[first + p.first_operand];
  const c10::IValue& b_value = stack[first + p.first_operand + 1];
  if (!a_value.isTensor() || !b_value.isTensor()) return;
  const at::Tensor& a = a_value.toTensor();
  const at::Tensor& b = b_value.toTensor();
  // Mixed dtypes are CUDA's (and CPU's) other error, raised by the kernel's own check.
  if (!is_vdev_tensor(a) || a.scalar_type() != b.scalar_type() ||
      cuda_multiplies(a.scalar_type())) {
    return;
  }
  // CUDA returns before dispatching on the dtype when there is nothing to multiply.
  if (a.numel() == 0 || b.numel() == 0) return;
  TORCH_CHECK_NOT_IMPLEMENTED(false, '"', p.cuda_name, "\" not implemented for '",
                              c10::toString(a.scalar_type()), "'");
}

bool runs_on_cpu_only(std::string_view name) {
  return name == "aten::histogram" || name == "aten::_histogramdd_bin_edges" ||
         name == "aten::_histogramdd_from_bin_cts" || name == "aten::_histogramdd_from_bin_tensors";
}

}  // namespace

void refuse_what_cuda_cannot_run(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const c10::FunctionSchema& schema = op.schema();
  const std::string_view name = schema.name();
  const std::size_t first = stack.size() - schema.arguments().size();
  if (const Product* p = product_of(name)) {
    refuse_integer_product(*p, stack, first);
    return;
  }
  if (runs_on_cpu_only(name)) {
    std::string full(name);
    if (!schema.overload_name().empty()) full += "." + schema.overload_name();
    TORCH_CHECK_NOT_IMPLEMENTED(false, "Could not run '", full,
                                "' with arguments from the 'vdev' backend: CUDA has no kernel for "
                                "this operator, so vdev has none either (it is only available for "
                                "the CPU backend).");
  }
}

}  // namespace vdev::backend
