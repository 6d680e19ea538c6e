#include "backend/executor/size_hint.h"

#include <ATen/core/Tensor.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "backend/common/thread_policy.h"

namespace vdev::backend {
namespace {

// The positions of the two matrix arguments of a matrix product (A: [..., M, K], B: [..., K, N]),
// whose multiply-adds are numel(A) * N; nullopt for any other operator.
std::optional<std::pair<std::size_t, std::size_t>> product_operands(std::string_view name) {
  if (name == "aten::mm" || name == "aten::bmm") return std::pair<std::size_t, std::size_t>{0, 1};
  if (name == "aten::addmm" || name == "aten::baddbmm" || name == "aten::addbmm" ||
      name == "aten::_addmm_activation") {
    return std::pair<std::size_t, std::size_t>{1, 2};
  }
  return std::nullopt;
}

std::uint64_t saturating_product(std::uint64_t a, std::uint64_t b) {
  std::uint64_t p = 0;
  return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

// The multiply-adds of one convolution pass: each element of `positions` (the output; transposed:
// the input) sums weight.numel() / weight.size(0) products (input channels per group times the
// kernel's positions).
std::uint64_t conv_multiply_adds(std::int64_t positions, const at::Tensor& weight) {
  if (weight.dim() == 0 || weight.size(0) == 0) return 0;
  return saturating_product(static_cast<std::uint64_t>(positions),
                            static_cast<std::uint64_t>(weight.numel() / weight.size(0)));
}

// The multiply-adds of a convolution (forward: input, weight, transposed at 0, 1, 6; backward:
// grad_output, input, weight, transposed, output_mask at 0, 1, 2, 7, 10), or 0 for any other
// operator. The backward's grad_input and grad_weight each cost about the forward's multiply-adds.
std::uint64_t convolution_multiply_adds(std::string_view name, const torch::jit::Stack& stack,
                                        std::size_t first, const std::vector<MetaReturn>& returns) {
  const bool forward = name == "aten::convolution";
  if (!forward && name != "aten::convolution_backward") return 0;
  const std::size_t in = forward ? first : first + 1;
  const c10::IValue& input = stack[in];
  const c10::IValue& weight = stack[in + 1];
  const c10::IValue& transposed = stack[in + 6];
  if (!input.isTensor() || !weight.isTensor() || !transposed.isBool()) return 0;
  // Forward: the output's positions (its meta return); backward: grad_output's.
  std::int64_t output = 0;
  if (forward) {
    if (returns.empty() || returns[0].tensors.empty() || !returns[0].tensors[0].defined) return 0;
    output = c10::multiply_integers(returns[0].tensors[0].sizes);
  } else if (stack[first].isTensor()) {
    output = stack[first].toTensor().numel();
  }
  const std::uint64_t one = conv_multiply_adds(
      transposed.toBool() ? input.toTensor().numel() : output, weight.toTensor());
  if (forward) return one;
  const c10::IValue& mask = stack[first + 10];
  if (!mask.isBoolList()) return one;
  const c10::List<bool> m = mask.toBoolList();
  return saturating_product(one, static_cast<std::uint64_t>(int{m.get(0)} + int{m.get(1)}));
}

}  // namespace

std::uint64_t size_hint(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                        std::size_t first, const std::vector<MetaReturn>& returns) {
  std::int64_t most = 0;
  for (std::size_t i = first; i < stack.size(); ++i) {
    if (stack[i].isTensor()) most = std::max(most, stack[i].toTensor().numel());
  }
  for (const MetaReturn& r : returns) {
    for (const MetaTensor& t : r.tensors) {
      if (t.defined) most = std::max(most, c10::multiply_integers(t.sizes));
    }
  }
  auto hint = static_cast<std::uint64_t>(most);
  std::uint64_t macs = convolution_multiply_adds(schema.name(), stack, first, returns);
  if (auto ab = product_operands(schema.name())) {
    const c10::IValue& a = stack[first + ab->first];
    const c10::IValue& b = stack[first + ab->second];
    if (a.isTensor() && b.isTensor() && b.toTensor().dim() >= 2) {
      macs = saturating_product(static_cast<std::uint64_t>(a.toTensor().numel()),
                                static_cast<std::uint64_t>(b.toTensor().size(-1)));
    }
  }
  return std::max(hint, macs / kMultiplyAddsPerElement);
}

}  // namespace vdev::backend
